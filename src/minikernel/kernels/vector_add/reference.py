"""Vector add: the fp64 reference and the seeded input generator every check and lab uses."""

from __future__ import annotations

import torch


def make_inputs(
    n: int, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two random vectors of ``n`` elements from a generator seeded with ``seed``, drawn on
    ``device`` itself (drawing 2^29 numbers on the CPU would take seconds): the same seed gives
    the same numbers on any CPU, and the same on any CUDA GPU."""
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(n, generator=g, dtype=torch.float32, device=device).to(dtype)
    b = torch.randn(n, generator=g, dtype=torch.float32, device=device).to(dtype)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b in float64, on the inputs' device: the answer every variant is measured against."""
    return a.double() + b.double()

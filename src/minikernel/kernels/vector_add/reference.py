"""Vector add: the fp64 reference and the seeded input generator every check and lab uses."""

from __future__ import annotations

import torch


def make_inputs(
    n: int, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two random vectors of ``n`` elements. Drawn on the CPU from a seeded generator, so the
    same seed gives the same numbers on any machine, then moved to ``device``."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, generator=g, dtype=torch.float32).to(dtype)
    b = torch.randn(n, generator=g, dtype=torch.float32).to(dtype)
    return a.to(device), b.to(device)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b in float64, on the inputs' device: the answer every variant is measured against."""
    return a.double() + b.double()

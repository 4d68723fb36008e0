"""Copy: the reference (the input itself, in float64) and the seeded input generator."""

from __future__ import annotations

import torch


def make_input(
    n: int, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", seed: int = 0
) -> torch.Tensor:
    """A random vector of ``n`` elements, drawn on ``device`` from a generator seeded with
    ``seed`` (the same seed gives the same numbers on any CPU, and on any CUDA GPU)."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(n, generator=g, dtype=torch.float32, device=device).to(dtype)


def reference(x: torch.Tensor) -> torch.Tensor:
    """What a copy must produce: ``x`` itself, bit for bit (float64 holds every value exactly)."""
    return x.double()


# A copy does no arithmetic, so every dtype must come back exactly: zero tolerance.
EXACT: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (0.0, 0.0),
    torch.float16: (0.0, 0.0),
    torch.bfloat16: (0.0, 0.0),
}

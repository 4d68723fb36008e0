"""Transpose and 2-D copy: the fp64 references and the seeded input generator."""

from __future__ import annotations

import torch


def make_input(
    m: int,
    n: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> torch.Tensor:
    """A random contiguous ``m x n`` matrix, drawn on ``device`` from a generator seeded with
    ``seed``."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(m, n, generator=g, dtype=torch.float32, device=device).to(dtype)


def reference(x: torch.Tensor) -> torch.Tensor:
    """``x`` transposed, in float64 (a transpose only moves values, so any variant must match
    it exactly)."""
    return x.double().t()


def reference_copy(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself in float64, whatever its strides."""
    return x.double()


EXACT: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (0.0, 0.0),
    torch.float16: (0.0, 0.0),
    torch.bfloat16: (0.0, 0.0),
}

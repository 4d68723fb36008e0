"""Add bias: the fp64 reference and the seeded input generator."""

from __future__ import annotations

import torch


def make_inputs(
    m: int,
    n: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A random contiguous ``m x n`` matrix and a random bias of ``n`` values, drawn on
    ``device`` from a generator seeded with ``seed``."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(m, n, generator=g, dtype=torch.float32, device=device).to(dtype)
    bias = torch.randn(n, generator=g, dtype=torch.float32, device=device).to(dtype)
    return x, bias


def reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x + bias`` in float64, the bias broadcast along the rows (added to every row)."""
    return x.double() + bias.double()[None, :]

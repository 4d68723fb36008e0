"""Matrix product: the fp64 reference and the seeded input generator every check and lab uses."""

from __future__ import annotations

import torch


def make_inputs(
    m: int,
    n: int,
    k: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """a (m x k), b (k x n) and a bias of n, standard normal, drawn on the CPU from a seeded
    generator (the same numbers on any machine), then cast and moved to ``device``.

    Each entry of a @ b is then a sum of k terms of variance 1: about sqrt(k) in size.
    """
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(k, n, generator=g)
    bias = torch.randn(n, generator=g)
    return tuple(t.to(dtype).to(device) for t in (a, b, bias))  # type: ignore[return-value]


def reference(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """act(a @ b + bias) in float64 on the inputs' device: what every variant is measured against.

    ``activation``: None, "relu" or "gelu" (the exact form, x * Phi(x), as torch's default).
    """
    c = a.double() @ b.double()
    if bias is not None:
        c = c + bias.double()
    if activation == "relu":
        c = torch.relu(c)
    elif activation == "gelu":
        c = 0.5 * c * (1.0 + torch.erf(c / 2.0**0.5))
    elif activation is not None:
        raise ValueError(f"unknown activation {activation!r}")
    return c

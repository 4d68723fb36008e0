"""RMSNorm: the fp64 reference and the seeded input generator every check and lab uses.

    y = x / sqrt(mean(x**2 over the last N elements) + eps) * weight

The reference is written with differentiable torch ops in float64, so the same function also
gives the reference gradients (``torch.autograd.grad`` on its output).
"""

from __future__ import annotations

import torch


def make_inputs(
    m: int,
    n: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
    *,
    weight_dtype: torch.dtype | None = None,
    with_grad_out: bool = False,
) -> tuple[torch.Tensor, ...]:
    """``x`` (m, n), ``weight`` (n,) and, with ``with_grad_out``, an upstream gradient ``dy``.

    Drawn on ``device`` itself from a seeded generator: the labs need tensors of several GB,
    which a CPU would take tens of seconds to draw. The same seed gives the same numbers on the
    same kind of device. ``x`` is centred on 0.5 rather than 0 so that a kernel that forgets
    the mean of squares (and computes a variance instead) is caught; the weight is near 1 with
    a spread, so that a kernel ignoring it is caught too.
    """
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(m, n, generator=g, device=device, dtype=dtype).add_(0.5)
    w_dtype = weight_dtype or dtype
    w = torch.randn(n, generator=g, device=device, dtype=torch.float32).mul_(0.5).add_(1.0)
    out: tuple[torch.Tensor, ...] = (x, w.to(w_dtype))
    if with_grad_out:
        out += (torch.randn(m, n, generator=g, device=device, dtype=dtype),)
    return out


def reference(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, n: int | None = None
) -> torch.Tensor:
    """RMSNorm over the last dimension in float64 (differentiable). ``n`` defaults to the size
    of the last dimension."""
    x64 = x.double()
    n = n or x64.shape[-1]
    rstd = torch.rsqrt(x64.pow(2).sum(-1, keepdim=True) / n + eps)
    y = x64 * rstd
    if weight is not None:
        y = y * weight.double()
    return y


def reference_grads(
    x: torch.Tensor, weight: torch.Tensor | None, dy: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dx, dweight) in float64: autograd through :func:`reference`."""
    x64 = x.detach().double().requires_grad_(True)
    w64 = None if weight is None else weight.detach().double().requires_grad_(True)
    y = reference(x64, w64, eps)
    inputs = [x64] if w64 is None else [x64, w64]
    grads = torch.autograd.grad(y, inputs, dy.double())
    return grads[0], (grads[1] if w64 is not None else None)

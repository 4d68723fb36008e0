"""Cross-entropy: the fp64 reference and the seeded input generator every check and lab uses."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def make_inputs(
    t: int,
    v: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
    *,
    ignore_frac: float = 0.0,
    ignore_index: int = -100,
    scale: float = 2.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (t, v) of spread ``scale`` and targets (t,) int64, a fraction ``ignore_frac`` of
    them set to ``ignore_index``. Drawn on ``device`` from a seeded generator (the labs need
    GBs of logits), so the same seed gives the same numbers on the same kind of device."""
    g = torch.Generator(device=device).manual_seed(seed)
    logits = torch.randn(t, v, generator=g, device=device, dtype=dtype).mul_(scale)
    target = torch.randint(0, v, (t,), generator=g, device=device, dtype=torch.int64)
    if ignore_frac > 0:
        drop = torch.rand(t, generator=g, device=device) < ignore_frac
        target = torch.where(drop, torch.full_like(target, ignore_index), target)
    return logits, target


def make_linear_inputs(
    t: int,
    h: int,
    v: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
    *,
    ignore_frac: float = 0.0,
    ignore_index: int = -100,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """hidden (t, h), weight (v, h), target (t,): logits = hidden @ weight.T of spread ~2."""
    g = torch.Generator(device=device).manual_seed(seed)
    hidden = torch.randn(t, h, generator=g, device=device, dtype=dtype)
    weight = torch.randn(v, h, generator=g, device=device, dtype=dtype).mul_(2.0 / h**0.5)
    target = torch.randint(0, v, (t,), generator=g, device=device, dtype=torch.int64)
    if ignore_frac > 0:
        drop = torch.rand(t, generator=g, device=device) < ignore_frac
        target = torch.where(drop, torch.full_like(target, ignore_index), target)
    return hidden, weight, target


def reference(
    logits: torch.Tensor,
    target: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """``torch.nn.functional.cross_entropy`` in float64 (differentiable)."""
    return F.cross_entropy(
        logits.double(),
        target.long(),
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )


def reference_grad(
    logits: torch.Tensor,
    target: torch.Tensor,
    grad_out: torch.Tensor | None = None,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, d loss / d logits) in float64, through autograd of :func:`reference`."""
    x = logits.detach().double().requires_grad_(True)
    loss = reference(x, target, **kwargs)  # type: ignore[arg-type]
    go = torch.ones_like(loss) if grad_out is None else grad_out.double()
    (grad,) = torch.autograd.grad(loss, x, go)
    return loss.detach(), grad


def reference_linear(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    grad_out: torch.Tensor | None = None,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, d hidden, d weight) in float64 for ``cross_entropy(hidden @ weight.T, target)``."""
    h = hidden.detach().double().requires_grad_(True)
    w = weight.detach().double().requires_grad_(True)
    loss = reference(h @ w.T, target, **kwargs)  # type: ignore[arg-type]
    go = torch.ones_like(loss) if grad_out is None else grad_out.double()
    dh, dw = torch.autograd.grad(loss, (h, w), go)
    return loss.detach(), dh, dw

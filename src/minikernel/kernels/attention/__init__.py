"""Attention forward, FlashAttention-2 style: ``softmax(q @ k^T * scale) @ v`` in one kernel.

Public entry point: :func:`attention`. ``VARIANTS`` lists the implementations by registry key;
``PEERS`` the baselines the lab measures beside them (PyTorch's scaled_dot_product_attention
forced to one backend each).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from minikernel._checks import check_device, check_same, check_tensor
from minikernel.kernels._registry import Variant

from .reference import make_inputs, reference

OP = "attention"
HERE = Path(__file__).resolve().parent
DTYPES = (torch.float16, torch.bfloat16)
HEAD_DIMS = (64, 128)

__all__ = [
    "DTYPES",
    "HEAD_DIMS",
    "OP",
    "PEERS",
    "VARIANTS",
    "attention",
    "attention_flops",
    "make_inputs",
    "make_runner",
    "reference",
]


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> int:
    """The FLOP model: q k^T and p v, 2 * S * S * D each per head; half of it when causal."""
    flops = 4 * batch * heads * seq * seq * head_dim
    return flops // 2 if causal else flops


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """TMA descriptors need 16-byte aligned base addresses; a rare misaligned view is copied."""
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _triton1(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, causal: bool, scale: float
) -> torch.Tensor:
    from .triton_kernels import launch_kernel1

    dst = _aligned(out)
    launch_kernel1(_aligned(q), _aligned(k), _aligned(v), dst, causal, scale)
    if dst is not out:
        out.copy_(dst)
    return out


def _torch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, causal: bool, scale: float
) -> torch.Tensor:
    """Fallback on any device: PyTorch's SDPA in float32, rounded once to the dtype."""
    o = F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal, scale=scale
    )
    return out.copy_(o)


VARIANTS: dict[str, Variant] = {
    "triton:1": Variant(
        OP,
        "triton:1",
        _triton1,
        (HERE / "triton_kernels.py",),
        "online softmax over TMA-loaded K/V blocks; masks only on the diagonal and the tail",
        dtypes=DTYPES,
    ),
}


def default_impl(t: torch.Tensor) -> str:
    """The implementation :func:`attention` picks when none is named."""
    if t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1":
        return "triton:1"
    return "torch"


def _check_inputs(
    q: object, k: object, v: object, causal: object, scale: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    op = OP
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(op, name, t, dtypes=DTYPES, ndim=4, contiguous=True, nonempty=True)
    assert (
        isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)
    )
    check_same(op, "k", k, "v", v)
    if q.device != k.device:
        raise ValueError(f"{op}: q is on {q.device} but k is on {k.device}")
    if q.dtype != k.dtype:
        raise TypeError(
            f"{op}: q has dtype {str(q.dtype).removeprefix('torch.')} but k has "
            f"{str(k.dtype).removeprefix('torch.')}; cast one of them first"
        )
    (b, h, _, d), (bk, hk, _, dk) = q.shape, k.shape
    if (b, h, d) != (bk, hk, dk):
        raise ValueError(
            f"{op}: q has shape {tuple(q.shape)} and k {tuple(k.shape)}; the layout is "
            "(batch, heads, seq, head_dim) and batch, heads and head_dim must agree"
        )
    if d not in HEAD_DIMS:
        raise ValueError(f"{op}: head_dim must be one of {HEAD_DIMS}, got {d}")
    if not isinstance(causal, bool):
        raise TypeError(f"{op}: causal must be a bool, got {type(causal).__name__}")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, int | float):
            raise TypeError(f"{op}: scale must be a float or None, got {type(scale).__name__}")
        if not math.isfinite(scale) or scale <= 0:
            # The kernel takes each row's max of q.k before scaling, which is the max of the
            # scaled scores only for a positive scale.
            raise ValueError(f"{op}: scale must be finite and positive, got {scale}")
    return q, k, v


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
    out: torch.Tensor | None = None,
    impl: str | None = None,
) -> torch.Tensor:
    """Return ``softmax(q @ k^T * scale) @ v``, one query row at a time.

    ``q``: (batch, heads, seq_q, head_dim); ``k``, ``v``: (batch, heads, seq_k, head_dim);
    contiguous, float16 or bfloat16, head_dim 64 or 128, any sequence lengths. ``scale``
    defaults to 1/sqrt(head_dim). ``causal=True`` hides key j from query i when j > i (top-left
    aligned, like ``scaled_dot_product_attention(is_causal=True)``). ``impl``: a key of
    ``VARIANTS`` or ``"torch"``. Raises TypeError / ValueError naming the argument at fault.
    """
    op = OP
    q, k, v = _check_inputs(q, k, v, causal, scale)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if out is None:
        out = torch.empty_like(q)
    else:
        check_tensor(op, "out", out, dtypes=DTYPES, contiguous=True)
        check_same(op, "q", q, "out", out)
    impl = impl or default_impl(q)
    if impl == "torch":
        return _torch(q, k, v, out, causal, scale)
    if impl not in VARIANTS:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {[*VARIANTS, 'torch']}")
    check_device(op, impl, q)
    return VARIANTS[impl].fn(q, k, v, out, causal, scale)


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("sdpa:flash", "sdpa:cudnn", "sdpa:efficient")
"""PyTorch's scaled_dot_product_attention, forced to one backend each (sdpa_kernel)."""


def _sdpa_backend(impl: str) -> object:
    from torch.nn.attention import SDPBackend

    return {
        "sdpa:flash": SDPBackend.FLASH_ATTENTION,
        "sdpa:cudnn": SDPBackend.CUDNN_ATTENTION,
        "sdpa:efficient": SDPBackend.EFFICIENT_ATTENTION,
        "sdpa:math": SDPBackend.MATH,
    }[impl]


def make_runner(
    impl: str,
    shape: list[int],
    dtype: torch.dtype,
    causal: bool | str = False,
    device: str = "cuda",
    seed: int = 0,
    *,
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> Callable[[], torch.Tensor]:
    """A no-argument callable that runs ``impl`` once on seeded inputs of ``shape`` =
    (batch, heads, seq, head_dim), or on ``inputs`` = (q, k, v) when given (a lab shares one
    set among the implementations it compares). ``causal`` may come as text from the command
    line.

    For an ``sdpa:*`` peer whose backend refuses the case, calling the runner raises
    RuntimeError (PyTorch's "No available kernel"): the lab skips that case. The runner's
    ``inputs`` attribute holds its (q, k, v), for checking what it returns.
    """
    if isinstance(causal, str):
        causal = causal.lower() in ("1", "true", "causal", "yes")
    b, h, s, d = shape
    q, k, v = inputs if inputs is not None else make_inputs(b, h, s, d, dtype, device, seed)
    if impl.startswith("sdpa:"):
        from torch.nn.attention import sdpa_kernel

        backend = _sdpa_backend(impl)

        def run() -> torch.Tensor:
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))

    else:
        out = torch.empty_like(q)

        def run() -> torch.Tensor:
            return attention(q, k, v, causal=bool(causal), out=out, impl=impl)

    run.inputs = (q, k, v)  # type: ignore[attr-defined]
    return run

"""Cross-entropy over class logits, fused with its gradient; and fused with the linear layer.

Public entry points:

- :func:`cross_entropy` (like ``torch.nn.functional.cross_entropy`` for (T, V) logits and class
  targets: ``ignore_index``, ``reduction``, ``label_smoothing``), with autograd.
- :func:`linear_cross_entropy`: the loss of ``hidden @ weight.T``, with autograd, computed over
  chunks of tokens so that the (T, V) logits never exist in memory all at once.

``VARIANTS``: ``triton:1`` is the fused cross-entropy kernel on logits; ``cuda:1`` the same
fusion in CUDA C with each row held once in a thread-block cluster's shared memory (sm_90+;
the cases it does not take run ``triton:1``); ``triton:2`` is the fused linear +
cross-entropy built on the Triton kernel.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from minikernel._checks import FLOAT_DTYPES, check_device, check_tensor
from minikernel.bench.peers import compiled
from minikernel.kernels._peers import PeerUnavailable, import_peer
from minikernel.kernels._registry import Variant, with_inputs

from .reference import (
    make_inputs,
    make_linear_inputs,
    reference,
    reference_grad,
    reference_linear,
)

OP = "cross_entropy"
HERE = Path(__file__).resolve().parent
REDUCTIONS = ("mean", "sum", "none")
CHUNK_BYTES = 256 * 1024 * 1024
"""Default budget for one chunk of logits in :func:`linear_cross_entropy` (1024 tokens at a
128256-class vocabulary in bf16). Each chunk's matmuls are still (1024 x H) by (H x V), large
enough to run at full speed; the chunk is the largest allocation besides dW, so halving it from
2048 tokens takes a quarter of a GB off the call's peak above its inputs (at 8192 tokens x 4096
x 128256: dW 1.05 GB, the chunk's logits 0.53 GB at 2048 tokens, 0.26 GB at 1024)."""

__all__ = [
    "OP",
    "PEERS",
    "VARIANTS",
    "CrossEntropyFunction",
    "LinearCrossEntropyFunction",
    "bytes_moved",
    "cross_entropy",
    "linear_cross_entropy",
    "linear_flops",
    "make_inputs",
    "make_linear_inputs",
    "make_runner",
    "reference",
    "reference_grad",
    "reference_linear",
    "torch_chain_bytes",
]


def bytes_moved(t: int, v: int, dtype: torch.dtype, pass_: str = "fwd") -> int:
    """Byte model: the loss alone reads the logits once (T*V elements); loss and gradient
    read them once and write the gradient once (2*T*V), the least any implementation can move.
    Targets and per-row results (a few bytes per row) are left out."""
    b = torch.empty((), dtype=dtype).element_size()
    return (1 if pass_ == "fwd" else 2) * t * v * b


# PyTorch's eager cross-entropy on (T, V) logits, kernel by kernel: T*V-element tensors read
# and written per step, in units of the element size ("b": the logits' dtype, "f": fp32). The
# "fp32" recipe is the common ``F.cross_entropy(logits.float(), target)``, whose gradient is
# cast back to the logits' dtype.
TORCH_STEPS = {
    "torch:eager": (
        ("fwd", "log_softmax(x)", "b", "b"),
        ("fwd", "nll_loss (gathers T values)", "", ""),
        ("bwd", "nll_loss_backward: zeros, then scatter", "", "b"),
        ("bwd", "log_softmax_backward(grad, out)", "bb", "b"),
    ),
    "torch:fp32": (
        ("fwd", "x.float()", "b", "f"),
        ("fwd", "log_softmax(x32)", "f", "f"),
        ("fwd", "nll_loss (gathers T values)", "", ""),
        ("bwd", "nll_loss_backward: zeros, then scatter", "", "f"),
        ("bwd", "log_softmax_backward(grad, out)", "ff", "f"),
        ("bwd", "grad.to(x.dtype)", "f", "b"),
    ),
}


def torch_chain_bytes(t: int, v: int, dtype: torch.dtype, recipe: str, pass_: str) -> int:
    """What PyTorch's kernels move for ``recipe`` (a key of TORCH_STEPS), per TORCH_STEPS."""
    size = {"b": torch.empty((), dtype=dtype).element_size(), "f": 4}
    steps = [st for st in TORCH_STEPS[recipe] if pass_ == "fwd+bwd" or st[0] == "fwd"]
    per_element = sum(size[c] for _, _, read, write in steps for c in read + write)
    return t * v * per_element


def linear_flops(t: int, h: int, v: int, pass_: str = "fwd+bwd") -> int:
    """FLOP model of linear + cross-entropy: the logits matmul (2*T*V*H), and for the gradients
    two more of the same size (d hidden = G @ W, d weight = G.T @ hidden)."""
    return (1 if pass_ == "fwd" else 3) * 2 * t * v * h


def _n_valid(target: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """How many targets are not ignored, as a 1-element fp32 tensor on the targets' device
    (no host synchronisation)."""
    return (target != ignore_index).sum(dtype=torch.float32).reshape(1)


def _reduce(
    loss_rows: torch.Tensor, n_valid: torch.Tensor | None, reduction: str, dtype: torch.dtype
) -> torch.Tensor:
    """The batch's loss from per-row losses (n_valid: needed for the mean only)."""
    if reduction == "none":
        return loss_rows.to(dtype)
    total = loss_rows.sum()
    if reduction == "mean":
        assert n_valid is not None
        total = total / n_valid[0]  # 0 / 0 = nan when every target is ignored, as in PyTorch
    return total.to(dtype)


_TWICE = (
    "cross_entropy: the gradient computed in the forward pass was already handed to a first "
    "backward pass; to run backward twice on one graph, use reduction='none' (which computes "
    "the gradient in backward) or run the forward pass again"
)


def _scale_by(grad: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """The gradient computed in the forward pass, times the upstream gradient (a scalar, since
    the loss was reduced). The usual loss.backward() passes exactly 1, and then there is nothing
    to do; the kernel decides that on the GPU, so backward never waits for it."""
    from .triton_kernels import scale_unless_one

    return scale_unless_one(grad, grad_out.detach())


# --------------------------------------------------------------------------------------------
# Cross-entropy on logits
# --------------------------------------------------------------------------------------------


def _launcher(impl: str) -> Callable[..., None]:
    """The fused kernel of ``impl``: cuda:1 runs the cluster kernel where it can and hands the
    rest (see cuda_kernels.launch) to the Triton kernel, which takes every case."""
    from . import triton_kernels

    if impl != "cuda:1":
        return triton_kernels.launch

    def launch(x: torch.Tensor, *args: torch.Tensor, **kw: object) -> None:
        from . import cuda_kernels

        if kw.get("compute_loss", True) and kw.get("row_scale") is None:
            kw.pop("compute_loss", None)
            kw.pop("row_scale", None)
            if cuda_kernels.launch(x, *args, **kw):  # type: ignore[arg-type]
                return
        triton_kernels.launch(x, *args, **kw)  # type: ignore[arg-type]

    return launch


class CrossEntropyFunction(torch.autograd.Function):
    """``apply(logits, target, ignore_index, reduction, label_smoothing, inplace_backward)``.

    With 'mean' or 'sum', the forward pass also writes the gradient (for an upstream gradient
    of 1), into a new tensor or, with ``inplace_backward``, over the logits themselves; the
    backward pass hands it over. With 'none' the gradient depends on the upstream gradient of
    every row, so the forward pass keeps each row's log-sum-exp and the backward pass runs the
    kernel's gradient half with those factors.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        logits: torch.Tensor,
        target: torch.Tensor,
        ignore_index: int,
        reduction: str,
        label_smoothing: float,
        inplace_backward: bool,
        impl: str = "triton:1",
    ) -> torch.Tensor:
        launch = _launcher(impl)
        t = logits.shape[0]
        loss_rows = torch.empty(t, dtype=torch.float32, device=logits.device)
        lse = torch.empty((t, 2), dtype=torch.float32, device=logits.device)
        kw = {"ignore_index": ignore_index, "label_smoothing": label_smoothing}
        ctx.reduction, ctx.kw, ctx.inplace = reduction, kw, inplace_backward
        ctx.dx = None
        fused = ctx.needs_input_grad[0] and reduction != "none"
        if fused:
            n_valid = _n_valid(target, ignore_index)
            dx = logits if inplace_backward else torch.empty_like(logits)
            mean = n_valid if reduction == "mean" else None
            if t:
                launch(logits, target, loss_rows, lse, dx=dx, n_valid=mean, **kw)
            ctx.dx = dx
            return _reduce(loss_rows, n_valid, reduction, logits.dtype)
        if t and reduction != "none" and impl == "cuda:1":
            # The loss alone, reduced over the batch by the kernel's last block: one launch.
            from . import cuda_kernels

            total = torch.empty((), dtype=logits.dtype, device=logits.device)
            mean_ = reduction == "mean"
            if cuda_kernels.launch(logits, target, loss_rows, lse, total=total, mean=mean_, **kw):
                return total
        if t:
            launch(logits, target, loss_rows, lse, **kw)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(logits, target, lse)
        n_valid = _n_valid(target, ignore_index) if reduction == "mean" else None
        return _reduce(loss_rows, n_valid, reduction, logits.dtype)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        from .triton_kernels import launch

        if ctx.reduction != "none":
            dx, ctx.dx = ctx.dx, None  # drop our reference: autograd may then keep it as is
            if dx is None:
                raise RuntimeError(_TWICE)
            _scale_by(dx, grad_out)
            return dx, None, None, None, None, None, None
        logits, target, lse = ctx.saved_tensors
        dx = logits if ctx.inplace else torch.empty_like(logits)
        if logits.shape[0]:
            unused = torch.empty(0, device=logits.device)
            launch(
                logits,
                target,
                unused,
                lse,
                dx=dx,
                compute_loss=False,
                row_scale=grad_out.float().contiguous(),
                **ctx.kw,
            )
        return dx, None, None, None, None, None, None


def _check_common(
    op: str, target: torch.Tensor, t: int, device: torch.device, reduction: str, smoothing: float
) -> None:
    check_tensor(op, "target", target, dtypes=(torch.int64, torch.int32), ndim=1)
    if target.shape[0] != t:
        raise ValueError(f"{op}: target has {target.shape[0]} entries but there are {t} rows")
    if target.device != device:
        raise ValueError(f"{op}: target is on {target.device} but the inputs are on {device}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {smoothing}")


def default_impl(t: torch.Tensor) -> str:
    """What :func:`cross_entropy` runs when no impl is named: the cluster kernel ``cuda:1`` on
    sm_90+ GPUs with NVIDIA's Python bindings (it hands every case it does not take to the
    Triton kernel; on the H200 it is the faster of the two at every shape the lab measures with
    a gradient, and at the large ones for the loss alone), ``triton:1`` on other GPUs and under
    Triton's interpreter, PyTorch otherwise."""
    if t.is_cuda:
        from minikernel.cuda import clusters_available

        return "cuda:1" if clusters_available(t.device) else "triton:1"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "triton:1"
    return "torch"


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    inplace_backward: bool = False,
    impl: str | None = None,
) -> torch.Tensor:
    """Cross-entropy of ``logits`` (T, V) against class indices ``target`` (T,), with autograd.

    Same result as ``torch.nn.functional.cross_entropy`` with the same keywords, in the logits'
    dtype (float32, float16 or bfloat16). Where PyTorch would stop on a device assert (a
    target outside [0, V) that is not ``ignore_index``), that row's loss and gradient are NaN.
    No fp32 copy of the logits is made; with a gradient, memory holds the logits and one
    gradient of the same dtype (none extra with ``inplace_backward=True``, which overwrites the
    logits with their gradient during the forward pass). ``impl``: ``"triton:1"``,
    ``"cuda:1"`` (sm_90+) or ``"torch"``.
    """
    op = OP
    check_tensor(op, "logits", logits, dtypes=FLOAT_DTYPES, ndim=2)
    if logits.shape[1] == 0:
        raise ValueError(f"{op}: logits has no classes (shape {tuple(logits.shape)})")
    if logits.stride(1) != 1:
        raise ValueError(
            f"{op}: logits must have unit stride along the classes, got strides "
            f"{logits.stride()}; call .contiguous() first"
        )
    _check_common(op, target, logits.shape[0], logits.device, reduction, label_smoothing)
    impl = impl or default_impl(logits)
    if impl == "torch":
        return F.cross_entropy(
            logits,
            target.long(),
            ignore_index=ignore_index,
            reduction=reduction,
            label_smoothing=label_smoothing,
        )
    if impl not in ("triton:1", "cuda:1"):
        raise ValueError(
            f"{op}: unknown impl {impl!r}; choose from ['triton:1', 'cuda:1', 'torch']"
        )
    check_device(op, impl, logits)
    return CrossEntropyFunction.apply(
        logits,
        target,
        int(ignore_index),
        reduction,
        float(label_smoothing),
        inplace_backward,
        impl,
    )


# --------------------------------------------------------------------------------------------
# Linear + cross-entropy, chunked over tokens
# --------------------------------------------------------------------------------------------


def default_chunk(v: int, dtype: torch.dtype) -> int:
    """Tokens per chunk: the largest power of two whose logits fit in CHUNK_BYTES."""
    per_token = v * torch.empty((), dtype=dtype).element_size()
    chunk = 16
    while chunk * 2 * per_token <= CHUNK_BYTES:
        chunk *= 2
    return chunk


# --8<-- [start:kernel2]
def _linear_ce_chunks(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    loss_rows: torch.Tensor,
    lse: torch.Tensor,
    chunk: int,
    *,
    grads: bool,
    need_h: bool,
    need_w: bool,
    n_valid: torch.Tensor | None = None,
    row_scale: torch.Tensor | None = None,
    compute_loss: bool = True,
    **kw: object,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """One walk over the tokens, ``chunk`` at a time. Per chunk: its logits (chunk x V) by
    matmul into one reused buffer; the fused kernel turns them into loss and, in place, their
    gradient; two more matmuls add the chunk's share of d hidden and d weight. Only one
    chunk of logits ever exists."""
    from .triton_kernels import launch

    t = hidden.shape[0]
    buf = torch.empty((min(chunk, t), weight.shape[0]), dtype=hidden.dtype, device=hidden.device)
    dh = torch.empty_like(hidden) if grads and need_h else None
    dw = None
    for c0 in range(0, t, chunk):
        c1 = min(c0 + chunk, t)
        h = hidden[c0:c1]
        logits = torch.mm(h, weight.t(), out=buf[: c1 - c0])
        launch(
            logits,
            target[c0:c1],
            loss_rows[c0:c1],
            lse[c0:c1],
            dx=logits if grads else None,
            compute_loss=compute_loss,
            n_valid=n_valid,
            row_scale=None if row_scale is None else row_scale[c0:c1],
            **kw,  # type: ignore[arg-type]
        )
        if grads and need_h:
            torch.mm(logits, weight, out=dh[c0:c1])  # type: ignore[index]
        if grads and need_w:
            # d weight accumulates in the weight's dtype, as the matmul's epilogue adds to it
            dw = torch.mm(logits.t(), h) if dw is None else dw.addmm_(logits.t(), h)
    if grads and need_w and dw is None:
        dw = torch.zeros_like(weight)
    return dh, dw


# --8<-- [end:kernel2]


class LinearCrossEntropyFunction(torch.autograd.Function):
    """``apply(hidden, weight, target, ignore_index, reduction, label_smoothing, chunk)``.

    'mean' and 'sum': the gradients are computed during the forward pass (three matmuls per
    chunk, as PyTorch's linear + cross-entropy does in forward and backward together) and
    scaled in backward if the upstream gradient is not 1. 'none': the forward pass computes
    the losses only; backward recomputes each chunk's logits (a fourth matmul) to apply every
    row's upstream gradient.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        target: torch.Tensor,
        ignore_index: int,
        reduction: str,
        label_smoothing: float,
        chunk: int,
    ) -> torch.Tensor:
        t = hidden.shape[0]
        loss_rows = torch.empty(t, dtype=torch.float32, device=hidden.device)
        lse = torch.empty((t, 2), dtype=torch.float32, device=hidden.device)
        n_valid = _n_valid(target, ignore_index)
        kw = {"ignore_index": ignore_index, "label_smoothing": label_smoothing}
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        fused = (need_h or need_w) and reduction != "none"
        dh, dw = _linear_ce_chunks(
            hidden,
            weight,
            target,
            loss_rows,
            lse,
            chunk,
            grads=fused,
            need_h=need_h,
            need_w=need_w,
            n_valid=n_valid if reduction == "mean" else None,
            **kw,
        )
        ctx.reduction, ctx.kw, ctx.chunk = reduction, kw, chunk
        ctx.grads = (dh, dw)
        if not fused and (need_h or need_w):
            ctx.save_for_backward(hidden, weight, target, lse)
        return _reduce(loss_rows, n_valid, reduction, hidden.dtype)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if ctx.reduction != "none":
            (dh, dw), ctx.grads = ctx.grads, (None, None)
            if dh is None and dw is None:
                raise RuntimeError(_TWICE)
            dh = _scale_by(dh, grad_out) if dh is not None else None
            dw = _scale_by(dw, grad_out) if dw is not None else None
        else:
            hidden, weight, target, lse = ctx.saved_tensors
            unused = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
            dh, dw = _linear_ce_chunks(
                hidden,
                weight,
                target,
                unused,
                lse,
                ctx.chunk,
                grads=True,
                need_h=need_h,
                need_w=need_w,
                row_scale=grad_out.float().contiguous(),
                compute_loss=False,
                **ctx.kw,
            )
        return (
            dh if need_h else None,
            dw if need_w else None,
            None,
            None,
            None,
            None,
            None,
        )


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    chunk_size: int | None = None,
    impl: str | None = None,
) -> torch.Tensor:
    """``cross_entropy(hidden @ weight.T, target)`` without ever holding all the logits.

    ``hidden`` (T, H) and ``weight`` (V, H): contiguous, same float dtype and device;
    ``target`` (T,) int64/int32. Autograd gives d hidden and d weight. Memory beyond the
    inputs and gradients: one chunk of ``chunk_size`` x V logits (by default the largest power
    of two within CHUNK_BYTES, 256 MiB). ``impl``: ``"triton:2"`` or ``"torch"`` (the unfused
    ``F.cross_entropy(F.linear(hidden, weight), target)``).
    """
    op = "linear_cross_entropy"
    check_tensor(op, "hidden", hidden, dtypes=FLOAT_DTYPES, ndim=2, contiguous=True)
    check_tensor(op, "weight", weight, dtypes=FLOAT_DTYPES, ndim=2, contiguous=True)
    if weight.dtype != hidden.dtype:
        raise TypeError(
            f"{op}: hidden has dtype {str(hidden.dtype).removeprefix('torch.')} but weight has "
            f"{str(weight.dtype).removeprefix('torch.')}; cast one of them first"
        )
    if weight.device != hidden.device:
        raise ValueError(f"{op}: hidden is on {hidden.device} but weight is on {weight.device}")
    if weight.shape[1] != hidden.shape[1]:
        raise ValueError(
            f"{op}: hidden has {hidden.shape[1]} features but weight has shape "
            f"{tuple(weight.shape)}; it must be (vocabulary, {hidden.shape[1]})"
        )
    if weight.shape[0] == 0:
        raise ValueError(f"{op}: weight has no rows: the vocabulary is empty")
    _check_common(op, target, hidden.shape[0], hidden.device, reduction, label_smoothing)
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"{op}: chunk_size must be >= 1, got {chunk_size}")
    impl = impl or ("torch" if default_impl(hidden) == "torch" else "triton:2")
    if impl == "torch":
        return F.cross_entropy(
            F.linear(hidden, weight),
            target.long(),
            ignore_index=ignore_index,
            reduction=reduction,
            label_smoothing=label_smoothing,
        )
    if impl != "triton:2":
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from ['triton:2', 'torch']")
    check_device(op, "triton:2", hidden)
    chunk = chunk_size or default_chunk(weight.shape[0], hidden.dtype)
    return LinearCrossEntropyFunction.apply(
        hidden, weight, target, int(ignore_index), reduction, float(label_smoothing), chunk
    )


_SOURCES = (HERE / "triton_kernels.py", Path(__file__))
_CUDA_SOURCES = (
    HERE / "cross_entropy.cu",
    HERE.parent.parent / "cuda" / "common.cuh",
    HERE.parent.parent / "cuda" / "cluster.cuh",
    HERE.parent.parent / "cuda" / "slices.py",
    HERE / "cuda_kernels.py",
    *_SOURCES,
)

VARIANTS: dict[str, Variant] = {
    "triton:1": Variant(
        OP,
        "triton:1",
        cross_entropy,
        _SOURCES,
        "loss and gradient in one kernel: online log-sum-exp, gradient written in the same pass",
    ),
    "cuda:1": Variant(
        OP,
        "cuda:1",
        functools.partial(cross_entropy, impl="cuda:1"),
        _CUDA_SOURCES,
        "the same fusion in CUDA C: each row read once into a thread-block cluster's shared memory",
    ),
    "triton:2": Variant(
        OP,
        "triton:2",
        linear_cross_entropy,
        _SOURCES,
        "linear + cross-entropy over chunks of tokens: the full logits never exist",
    ),
}


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu
# --------------------------------------------------------------------------------------------

PEERS = ("torch:eager", "torch:fp32", "torch:compile", "liger", "quack")
"""On logits: PyTorch on the logits' dtype, PyTorch after the usual ``logits.float()`` upcast,
torch.compile, Liger-Kernel, QuACK. On hidden states (shape [T, H, V]): PyTorch's linear +
cross-entropy, torch.compile of it, Liger's fused linear cross-entropy."""


def _first(out: object) -> torch.Tensor:
    """Liger returns the loss, or a tuple / an output object holding it, by version."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, tuple):
        return out[0]
    return out.loss  # type: ignore[attr-defined]


def _ce_loss_fn(impl: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if impl in ("triton:1", "cuda:1"):
        return lambda x, t: cross_entropy(x, t, impl=impl)
    if impl == "torch:eager":
        return lambda x, t: F.cross_entropy(x, t)
    if impl == "torch:fp32":
        return lambda x, t: F.cross_entropy(x.float(), t)
    if impl == "torch:compile":
        return compiled(lambda x, t: F.cross_entropy(x, t))
    if impl == "liger":
        mod = import_peer("liger_kernel.transformers.cross_entropy", "liger-kernel")
        loss = mod.LigerCrossEntropyLoss()
        return lambda x, t: _first(loss(x, t))
    if impl == "quack":
        quack = import_peer("quack", "quack-kernels")
        return lambda x, t: quack.cross_entropy(x, t, reduction="mean")
    raise ValueError(f"{OP}: no cross-entropy on logits for impl {impl!r}")


def _linear_loss_fn(
    impl: str,
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    if impl == "triton:2":
        return lambda h, w, t: linear_cross_entropy(h, w, t, impl="triton:2")
    if impl == "torch:eager":
        return lambda h, w, t: F.cross_entropy(F.linear(h, w), t)
    if impl == "torch:compile":
        return compiled(lambda h, w, t: F.cross_entropy(F.linear(h, w), t))
    if impl == "liger":
        mod = import_peer("liger_kernel.transformers.fused_linear_cross_entropy", "liger-kernel")
        loss = mod.LigerFusedLinearCrossEntropyLoss()
        return lambda h, w, t: _first(loss(w, h, t))
    raise PeerUnavailable(f"{impl} has no fused linear cross-entropy here")


def make_runner(
    impl: str,
    shape: list[int],
    dtype: torch.dtype,
    pass_: str = "fwd",
    device: str = "cuda",
    seed: int = 0,
) -> Callable[[], object]:
    """A no-argument callable running ``impl`` once on seeded inputs.

    ``shape`` [T, V]: cross-entropy on logits. ``shape`` [T, H, V]: linear + cross-entropy.
    ``pass_``: "fwd" (the loss alone, no gradient wanted) or "fwd+bwd" (the loss and the
    gradients, as a training step needs them: ``torch.autograd.grad`` of the loss). The
    callable returns the loss, or the tuple of gradients; ``runner.inputs`` holds the inputs.
    """
    if pass_ not in ("fwd", "fwd+bwd"):
        raise ValueError(f"{OP}: pass_ must be 'fwd' or 'fwd+bwd', got {pass_!r}")
    grad = pass_ == "fwd+bwd"
    if len(shape) == 2:
        t, v = shape
        logits, target = make_inputs(t, v, dtype, device, seed)
        fn = _ce_loss_fn(impl)
        logits.requires_grad_(grad)
        if not grad:
            return with_inputs(lambda: fn(logits, target), logits, target)
        return with_inputs(lambda: torch.autograd.grad(fn(logits, target), logits), logits, target)
    t, h, v = shape
    hidden, weight, target = make_linear_inputs(t, h, v, dtype, device, seed)
    fn3 = _linear_loss_fn(impl)
    hidden.requires_grad_(grad)
    weight.requires_grad_(grad)
    if not grad:
        return with_inputs(lambda: fn3(hidden, weight, target), hidden, weight, target)
    return with_inputs(
        lambda: torch.autograd.grad(fn3(hidden, weight, target), (hidden, weight)),
        hidden,
        weight,
        target,
    )

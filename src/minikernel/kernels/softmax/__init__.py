"""Softmax along one dimension: a ladder of CUDA C kernels, two Triton kernels and a dispatcher.

Public entry point: :func:`softmax`. ``VARIANTS`` lists the implementations by registry key
(``cuda:1`` ... ``cuda:16``, ``triton:1``, ``triton:2``); ``"numpy"`` is the CPU fallback.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from minikernel._checks import FLOAT_DTYPES, check_device, check_same, check_tensor
from minikernel.bench.peers import compiled
from minikernel.kernels._peers import import_peer
from minikernel.kernels._registry import Variant

from .cuda_kernels import CU_FILE, RUNGS, UnsupportedShape, device_facts, plan
from .reference import TOLERANCES, make_inputs, reference, tolerances

OP = "softmax"
HERE = Path(__file__).resolve().parent

__all__ = [
    "FALLBACK_ORDER",
    "OP",
    "PEERS",
    "TOLERANCES",
    "VARIANTS",
    "UnsupportedShape",
    "bytes_moved",
    "default_impl",
    "make_inputs",
    "make_runner",
    "reference",
    "softmax",
    "supports",
    "tolerances",
]


def bytes_moved(m: int, n: int, dtype: torch.dtype) -> int:
    """The byte model: every element of x read once, every element of y written once."""
    return 2 * m * n * torch.empty((), dtype=dtype).element_size()


# --------------------------------------------------------------------------------------------
# The implementations. Each takes contiguous (M, N) tensors x and y and fills y.
# --------------------------------------------------------------------------------------------


def _cuda(rung: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    launch = None  # cuda_kernels, imported on the first call (it needs nothing until then)

    def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        nonlocal launch
        if launch is None:
            from .cuda_kernels import launch
        return launch(rung, x, y)

    return run


def _triton1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    from .triton_kernels import TILE_MAX, launch_kernel1

    if x.shape[1] > TILE_MAX:
        dt = str(x.dtype).removeprefix("torch.")
        raise UnsupportedShape(
            f"softmax: impl 'triton:1' holds a row in registers, at most {TILE_MAX} columns; "
            f"got {x.shape[0]} x {x.shape[1]} {dt}. 'triton:2' takes rows of any length"
        )
    return launch_kernel1(x, y)


def _triton2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    from .triton_kernels import launch_kernel2

    return launch_kernel2(x, y)


def _numpy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CPU fallback: three passes in float32 NumPy (it has no bfloat16), rounded once to y's
    dtype. NumPy's max propagates NaN, so special rows come out as torch's."""
    a = x.detach().float().numpy()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        out = e / e.sum(axis=1, keepdims=True)
    y.copy_(torch.from_numpy(np.ascontiguousarray(out)).to(y.dtype))
    return y


_CUDA_SOURCES = (
    CU_FILE,
    HERE.parent.parent / "cuda" / "common.cuh",
    HERE.parent.parent / "cuda" / "cluster.cuh",
    HERE.parent.parent / "cuda" / "slices.py",
    HERE / "cuda_kernels.py",
)
_TRITON_SOURCES = (HERE / "triton_kernels.py",)

_CUDA_SUMMARIES = {
    1: "naive: one thread per row, three passes over global memory",
    2: "one block per row, row in shared memory, serial max/sum in thread 0",
    3: "parallel warp-shuffle and tree reductions",
    4: "online softmax: max and sum in one sweep, one block reduction",
    5: "16-byte vectors between global and shared memory",
    6: "the row held in registers, one block per row",
    7: "short rows: one warp per row, four rows per block",
    8: "rows of any length: online loop, second pass backwards through L2",
    9: "long rows split over a thread-block cluster, (max, sum) exchanged over DSMEM",
    10: "the row staged in shared memory, over a cluster when long; one exp per pass",
    11: "rows under 16 KB in registers with one exp per element; longer rows as rung 10",
    12: "rung 11, with an L2 prefetch ~8 MB of rows ahead on fp32 rows of 16 KB and more",
    13: "rung 12 with a two-instruction exponential (ex2.approx.ftz) and bf16 unpacking",
    14: "long rows over a cluster with each block's slice in registers, p kept in fp32",
    15: "short rows in groups of lanes sized to the row, exactly the vectors it needs",
    16: "rung 14's register slices with the exponent's shift folded into one FFMA",
}

VARIANTS: dict[str, Variant] = {
    **{
        f"cuda:{r}": Variant(OP, f"cuda:{r}", _cuda(r), _CUDA_SOURCES, _CUDA_SUMMARIES[r])
        for r in RUNGS
    },
    "triton:1": Variant(
        OP, "triton:1", _triton1, _TRITON_SOURCES, "fused single tile, row in registers"
    ),
    "triton:2": Variant(
        OP, "triton:2", _triton2, _TRITON_SOURCES, "online multi-tile, rows of any length"
    ),
}


def supports(
    impl: str, m: int, n: int, dtype: torch.dtype, device: int | None = None
) -> str | None:
    """Why ``impl`` cannot run an (m, n) ``dtype`` input by design, or None if it can.

    Only the shape limits of each rung (shared memory, registers); availability of a GPU or of
    Triton is :func:`default_impl`'s business. CUDA rungs ask the current GPU for its limits.
    """
    if impl.startswith("cuda:"):
        index = torch.cuda.current_device() if device is None else device
        try:
            plan(int(impl[5:]), m, n, dtype, device_facts(index))
        except UnsupportedShape as exc:
            return str(exc)
        return None
    if impl == "triton:1":
        from .triton_kernels import TILE_MAX

        return None if n <= TILE_MAX else f"triton:1 takes rows of at most {TILE_MAX} columns"
    return None


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------

FALLBACK_ORDER = ("triton:1", "cuda:16", "triton:2", "cuda:5", "cuda:1")
"""What :func:`softmax` tries on a CUDA tensor when no impl is named: the fused kernels first
(Triton's single tile, then the top CUDA C rung, which handles any row length), then the
shared-memory rung, then the naive one; the first whose toolchain is installed and which takes
the shape wins."""


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def default_impl(x: torch.Tensor, n: int | None = None) -> str:
    """The implementation :func:`softmax` runs when none is named, for rows of ``n`` elements."""
    n = x.shape[-1] if n is None else n
    if x.is_cuda:
        m = max(1, x.numel() // max(n, 1))
        for impl in FALLBACK_ORDER:
            toolchain = "triton" if impl.startswith("triton:") else "cuda.bindings"
            if _have(toolchain) and supports(impl, m, n, x.dtype, x.device.index) is None:
                return impl
        raise RuntimeError("softmax: neither Triton nor cuda-bindings is installed")
    if os.environ.get("TRITON_INTERPRET") == "1" and _have("triton"):
        from .triton_kernels import TILE_MAX

        return "triton:1" if n <= TILE_MAX else "triton:2"
    return "numpy"


def softmax(
    x: torch.Tensor,
    dim: int = -1,
    impl: str | None = None,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``torch.softmax(x, dim)`` computed by one of the kernels of this package.

    ``x``: a float32, float16 or bfloat16 tensor of any shape and strides, on a CUDA GPU or on
    the CPU. ``dim``: the dimension to normalise. ``impl``: a key of ``VARIANTS`` or
    ``"numpy"``; by default the best one available (see ``FALLBACK_ORDER``; on the CPU, Triton's
    interpreter when ``TRITON_INTERPRET=1``, else NumPy). ``out``: optional contiguous tensor
    of x's shape, dtype and device to write into.

    Rows holding NaN or +inf, or made only of -inf, come out NaN, as in torch. The result has
    x's shape; when ``dim`` is not the last dimension it is a permuted view of a contiguous
    buffer (the kernels normalise contiguous rows). Raises TypeError / ValueError naming the
    problem: an unsupported dtype, an empty ``dim``, a device the impl cannot use, an unknown
    impl, or a shape the named impl cannot hold (:class:`UnsupportedShape`).
    """
    op = OP
    check_tensor(op, "x", x, dtypes=FLOAT_DTYPES)
    if not (x.is_cuda or x.is_cpu):
        raise ValueError(f"{op}: x is on {x.device}; softmax runs on cpu or cuda tensors")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    ndim = max(x.dim(), 1)  # a 0-d tensor is one row of one element, as in torch
    if not -ndim <= dim < ndim:
        raise ValueError(f"{op}: dim {dim} is out of range for a tensor of {x.dim()} dimension(s)")
    dim %= ndim
    n = x.shape[dim] if x.dim() else 1
    if n == 0:
        raise ValueError(
            f"{op}: x has size 0 along dim {dim} (shape {tuple(x.shape)}): "
            "a softmax over no elements is undefined"
        )
    if out is not None:
        check_tensor(op, "out", out, dtypes=FLOAT_DTYPES, contiguous=True)
        check_same(op, "x", x, "out", out)

    impl = impl or default_impl(x, n)
    if impl == "numpy":
        if x.is_cuda:
            raise ValueError(f"{op}: impl 'numpy' runs on the CPU; got a tensor on {x.device}")
        run = _numpy
    elif impl in VARIANTS:
        check_device(op, impl, x)
        run = VARIANTS[impl].fn
    else:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {[*VARIANTS, 'numpy']}")

    if x.numel() == 0:  # rows of n > 0 elements, but no rows
        return torch.empty_like(x) if out is None else out
    last = x.dim() == 0 or dim == x.dim() - 1
    if last and x.dim() == 2 and x.is_contiguous():  # rows already: no views to build
        y = torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else out
        run(x, y)
        return y
    if last and x.is_contiguous():
        x2 = x.reshape(-1, n)
        y = torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else out
        run(x2, y.view(-1, n))
        return y
    # Move the softmax dimension last and make the rows contiguous (one copy of x), normalise,
    # and view the result back in x's dimension order.
    moved = x.movedim(dim, -1) if x.dim() else x.reshape(1)
    x2 = moved.contiguous().view(-1, n)
    y2 = torch.empty_like(x2)
    run(x2, y2)
    result = y2.view(moved.shape).movedim(-1, dim) if x.dim() else y2.view(())
    if out is not None:
        out.copy_(result)
        return out
    return result


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("torch:eager", "torch:compile", "liger", "quack")


def make_runner(
    impl: str,
    shape: list[int],
    dtype: torch.dtype,
    device: str = "cuda",
    seed: int = 0,
    *,
    inputs: torch.Tensor | tuple[torch.Tensor] | None = None,
) -> Callable[[], torch.Tensor]:
    """A no-argument callable that runs ``impl`` once on an (M, N) input: ``inputs`` (x, or
    (x,)) when a lab shares one input among the implementations, else seeded random logits.
    Peers: ``torch:eager``, ``torch:compile`` (compiled for this shape), ``liger``
    (Liger-Kernel, which refuses rows over 65536 with RuntimeError on the first call) and
    ``quack`` (PeerUnavailable where it is not installed)."""
    m, n = shape
    if inputs is None:
        x = make_inputs(m, n, dtype, device, seed)
    else:
        x = inputs[0] if isinstance(inputs, tuple) else inputs
    if impl == "torch:eager":
        return lambda: torch.softmax(x, dim=-1)
    if impl == "torch:compile":
        fn = compiled(functools.partial(torch.softmax, dim=-1))
        return lambda: fn(x)
    if impl == "liger":
        from liger_kernel.ops.softmax import LigerSoftmaxFunction

        return lambda: LigerSoftmaxFunction.apply(x)
    if impl == "quack":
        # The package, not `import quack.softmax`: quack/__init__.py rebinds the name
        # quack.softmax to its softmax function, so that import statement hands back the
        # function and `qs.softmax` fails (it did in a lab run, with quack-kernels 0.6.5).
        quack = import_peer("quack", "quack-kernels")
        return lambda: quack.softmax(x)
    if impl not in VARIANTS:
        raise ValueError(f"{OP}: unknown impl {impl!r}; choose from {[*VARIANTS, *PEERS]}")
    out = torch.empty_like(x)
    return lambda: softmax(x, impl=impl, out=out)

"""Transpose (``out = x.T``) and 2-D copy on tensors of any strides: lesson 7.

Public entry points: :func:`transpose`, :func:`copy2d`. ``VARIANTS`` lists the transposes
(naive, tiled); :func:`copy2d` is the strided copy the lesson builds them from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from minikernel._checks import FLOAT_DTYPES, check_device, check_tensor
from minikernel.kernels._layout import check_no_alias, check_writable
from minikernel.kernels._registry import Variant

from .reference import EXACT, make_input, reference, reference_copy

OP = "transpose"
HERE = Path(__file__).resolve().parent

__all__ = [
    "EXACT",
    "OP",
    "PEERS",
    "VARIANTS",
    "bytes_moved",
    "copy2d",
    "make_input",
    "make_runner",
    "reference",
    "reference_copy",
    "transpose",
]


def bytes_moved(m: int, n: int, dtype: torch.dtype) -> int:
    """The byte model: each of the m * n elements read once and written once."""
    return 2 * m * n * torch.empty((), dtype=dtype).element_size()


def _triton1(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    from .triton_kernels import launch_kernel1

    return launch_kernel1(x, out)


def _triton2(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    from .triton_kernels import launch_kernel2

    return launch_kernel2(x, out)


_TRITON_SOURCES = (HERE / "triton_kernels.py",)

VARIANTS: dict[str, Variant] = {
    "triton:1": Variant(
        OP,
        "triton:1",
        _triton1,
        _TRITON_SOURCES,
        "naive: rows of x in, columns of out written one strided element per lane",
    ),
    "triton:2": Variant(
        OP,
        "triton:2",
        _triton2,
        _TRITON_SOURCES,
        "tiled: 64 x 64 tiles, both load and store coalesced",
    ),
}
DEFAULT_IMPL = "triton:2"


def _check_out(
    op: str, x: torch.Tensor, out: torch.Tensor | None, shape: tuple[int, int]
) -> torch.Tensor:
    if out is None:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    check_tensor(op, "out", out, dtypes=FLOAT_DTYPES, ndim=2)
    if out.device != x.device:
        raise ValueError(f"{op}: x is on {x.device} but out is on {out.device}")
    if out.dtype != x.dtype:
        raise TypeError(
            f"{op}: x has dtype {str(x.dtype).removeprefix('torch.')} but out has "
            f"{str(out.dtype).removeprefix('torch.')}"
        )
    if tuple(out.shape) != shape:
        raise ValueError(f"{op}: out must have shape {shape}, got {tuple(out.shape)}")
    check_writable(op, "out", out)
    check_no_alias(op, "out", out, "x", x)
    return out


# --8<-- [start:transpose]
def transpose(
    x: torch.Tensor, *, out: torch.Tensor | None = None, impl: str | None = None
) -> torch.Tensor:
    """Return ``x.T`` as a new (by default contiguous) tensor, computed by a Triton kernel.

    ``x``: a 2-D float32/float16/bfloat16 tensor with any strides (a transposed view, a slice
    with a step). ``out``: optional ``(N, M)`` tensor of any non-overlapping strides, not
    sharing memory with ``x``. ``impl``: ``"triton:1"`` (naive) or ``"triton:2"`` (tiled,
    the default). Raises TypeError / ValueError naming the argument at fault.
    """
    op = OP
    check_tensor(op, "x", x, dtypes=FLOAT_DTYPES, ndim=2)
    m, n = x.shape
    out = _check_out(op, x, out, (n, m))
    impl = impl or DEFAULT_IMPL
    if impl not in VARIANTS:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {list(VARIANTS)}")
    check_device(op, impl, x)
    if x.numel() == 0:
        return out
    return VARIANTS[impl].fn(x, out)


# --8<-- [end:transpose]


def copy2d(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Return a copy of the 2-D tensor ``x`` (any strides) made by ``copy2d_kernel``: by
    default a contiguous one, like ``x.contiguous()``, or into ``out`` (any non-overlapping
    strides, e.g. a transposed view: then it is a transpose)."""
    from .triton_kernels import launch_copy2d

    op = "copy2d"
    check_tensor(op, "x", x, dtypes=FLOAT_DTYPES, ndim=2)
    out = _check_out(op, x, out, (x.shape[0], x.shape[1]))
    check_device(op, "triton:copy2d", x)
    if x.numel() == 0:
        return out
    return launch_copy2d(x, out)


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("torch:eager",)


def make_runner(
    impl: str, shape: list[int], dtype: torch.dtype, device: str = "cuda", seed: int = 0
) -> Callable[[], torch.Tensor]:
    """A no-argument callable that transposes a seeded contiguous ``shape`` matrix once."""
    m, n = shape
    x = make_input(m, n, dtype, device, seed)
    if impl == "torch:eager":
        return lambda: x.t().contiguous()
    out = torch.empty((n, m), dtype=dtype, device=device)
    return lambda: transpose(x, out=out, impl=impl)

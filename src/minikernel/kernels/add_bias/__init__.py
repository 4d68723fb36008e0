"""Add bias: ``out = x + bias``, the bias added to every row of a 2-D tensor (lesson 7).

The same broadcast is the epilogue of a linear layer (lesson 9 fuses it into the GEMM).
Public entry point: :func:`add_bias`. ``VARIANTS`` lists the implementations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from minikernel._checks import FLOAT_DTYPES, check_device, check_tensor
from minikernel.kernels._layout import check_no_alias, check_writable
from minikernel.kernels._registry import Variant

from .reference import make_inputs, reference

OP = "add_bias"
HERE = Path(__file__).resolve().parent

__all__ = [
    "OP",
    "PEERS",
    "VARIANTS",
    "add_bias",
    "bytes_moved",
    "make_inputs",
    "make_runner",
    "reference",
]


def bytes_moved(m: int, n: int, dtype: torch.dtype) -> int:
    """The byte model: x read and out written once (2 * m * n elements), the bias read once."""
    return (2 * m * n + n) * torch.empty((), dtype=dtype).element_size()


def _triton1(x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    from .triton_kernels import launch_kernel1

    return launch_kernel1(x, bias, out)


VARIANTS: dict[str, Variant] = {
    "triton:1": Variant(
        OP,
        "triton:1",
        _triton1,
        (HERE / "triton_kernels.py",),
        "16 x 256 tiles, bias loaded once per tile and broadcast down its rows",
    ),
}


# --8<-- [start:add_bias]
def add_bias(
    x: torch.Tensor,
    bias: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    impl: str = "triton:1",
) -> torch.Tensor:
    """Return ``x + bias`` (``bias[j]`` added to column ``j`` of every row), by a Triton kernel.

    ``x``: 2-D float32/float16/bfloat16 tensor, any strides. ``bias``: 1-D, ``x.shape[1]``
    values, same dtype and device, any stride. ``out``: optional ``x.shape`` tensor of any
    non-overlapping strides, not sharing memory with the inputs. Raises TypeError /
    ValueError naming the argument at fault.
    """
    op = OP
    check_tensor(op, "x", x, dtypes=FLOAT_DTYPES, ndim=2)
    check_tensor(op, "bias", bias, dtypes=FLOAT_DTYPES, ndim=1)
    if bias.device != x.device:
        raise ValueError(f"{op}: x is on {x.device} but bias is on {bias.device}")
    if bias.dtype != x.dtype:
        raise TypeError(
            f"{op}: x has dtype {str(x.dtype).removeprefix('torch.')} but bias has "
            f"{str(bias.dtype).removeprefix('torch.')}; cast one of them first"
        )
    if bias.shape[0] != x.shape[1]:
        raise ValueError(
            f"{op}: bias has {bias.shape[0]} values but x has {x.shape[1]} columns "
            f"(x shape {tuple(x.shape)}); the bias is added to every row"
        )
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    else:
        check_tensor(op, "out", out, dtypes=FLOAT_DTYPES, ndim=2)
        if out.device != x.device or out.dtype != x.dtype or out.shape != x.shape:
            raise ValueError(
                f"{op}: out must be a {tuple(x.shape)} {str(x.dtype).removeprefix('torch.')} "
                f"tensor on {x.device}, got {tuple(out.shape)} "
                f"{str(out.dtype).removeprefix('torch.')} on {out.device}"
            )
        check_writable(op, "out", out)
        check_no_alias(op, "out", out, "x", x)
        check_no_alias(op, "out", out, "bias", bias)
    if impl not in VARIANTS:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {list(VARIANTS)}")
    check_device(op, impl, x)
    if x.numel() == 0:
        return out
    return VARIANTS[impl].fn(x, bias, out)


# --8<-- [end:add_bias]


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("torch:eager",)


def make_runner(
    impl: str, shape: list[int], dtype: torch.dtype, device: str = "cuda", seed: int = 0
) -> Callable[[], torch.Tensor]:
    """A no-argument callable that adds a seeded bias to a seeded ``shape`` matrix once."""
    m, n = shape
    x, bias = make_inputs(m, n, dtype, device, seed)
    if impl == "torch:eager":
        return lambda: x + bias
    out = torch.empty_like(x)
    return lambda: add_bias(x, bias, out=out, impl=impl)

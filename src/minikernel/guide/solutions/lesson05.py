"""Lesson 5 (vector add, the whole cycle): solutions.

Exercise 1: ``axpy`` (``alpha * x + y``): kernel, and a host wrapper that checks its inputs.
Exercise 2: a validation protocol: many sizes, every dtype, guard margins, a tolerance per
dtype; it returns what failed instead of stopping at the first failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
import triton
import triton.language as tl

from minikernel._checks import FLOAT_DTYPES, check_device, check_same, check_tensor
from minikernel.testing import DEFAULT_TOLERANCES, run_checked


# --8<-- [start:ex1]
@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x + y).to(out_ptr.dtype.element_ty), mask=mask)


def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``alpha * x + y`` for contiguous float tensors of one shape, dtype and device."""
    op = "axpy"
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        raise TypeError(f"{op}: alpha must be a Python number, got {type(alpha).__name__}")
    check_tensor(op, "x", x, dtypes=FLOAT_DTYPES, contiguous=True)
    check_tensor(op, "y", y, dtypes=FLOAT_DTYPES, contiguous=True)
    check_same(op, "x", x, "y", y)
    check_device(op, "triton:1", x)
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, float(alpha), BLOCK_SIZE=1024)
    return out


# --8<-- [end:ex1]


# --8<-- [start:ex2]
# 1: all tail. 1023/1024/1025: around one block. 4097: a few blocks and a tail.
# 65537: many blocks, odd. Chosen so that every kind of edge meets every dtype.
VALIDATION_SIZES = (1, 1023, 1024, 1025, 4097, 65537)


def validate(
    fn: Callable[..., torch.Tensor],
    reference: Callable[..., torch.Tensor],
    make_inputs: Callable[[int, torch.dtype], list[torch.Tensor]],
    *,
    sizes: Iterable[int] = VALIDATION_SIZES,
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.float16),
    tolerances: Mapping[torch.dtype, tuple[float, float]] = DEFAULT_TOLERANCES,
) -> list[str]:
    """Run ``fn(*inputs, out)`` against ``reference(*inputs)`` on every size and dtype.

    Returns the failures, one line each (empty: all passed). Each run is guarded: writes
    outside the output and elements left unwritten fail too, not only wrong values.
    """
    failures = []
    for dtype in dtypes:
        for n in sizes:
            inputs = make_inputs(n, dtype)
            result = run_checked(fn, inputs, reference(*inputs), tolerances=tolerances)
            if not result.ok:
                failures.append(result.message)
    return failures


# --8<-- [end:ex2]

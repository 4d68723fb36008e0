"""Lesson 1 (what Triton is, why fusion matters): solutions.

Exercise 1: count the kernels and DRAM bytes of ``y = x * torch.sigmoid(x)`` (SiLU) in eager
PyTorch and fused into one kernel.
Exercise 2: write the fused kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# --8<-- [start:ex1]
def silu_traffic(n: int, dtype: torch.dtype = torch.float32) -> dict[str, dict[str, int]]:
    """Kernels launched and bytes moved by ``x * sigmoid(x)`` over ``n`` elements.

    Eager runs two kernels: ``s = sigmoid(x)`` reads x and writes s (2n elements), then
    ``x * s`` reads both and writes y (3n). Fused, x is read once and y written once (2n):
    s lives in registers and never reaches memory.
    """
    e = torch.empty((), dtype=dtype).element_size()
    return {
        "eager": {"kernels": 2, "bytes": (2 + 3) * n * e},
        "fused": {"kernels": 1, "bytes": 2 * n * e},
    }


# --8<-- [end:ex1]


# --8<-- [start:ex2]
@triton.jit
def silu_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = x * tl.sigmoid(x)  # the intermediate sigmoid(x) stays in registers
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu(x: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(x)`` in one pass over memory (x contiguous)."""
    if not x.is_contiguous():
        raise ValueError("silu: x must be contiguous")
    out = torch.empty_like(x)
    n = x.numel()
    silu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
    return out


# --8<-- [end:ex2]

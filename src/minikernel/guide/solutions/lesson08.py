"""Lesson 8 (reductions): solutions.

Exercise 1: the maximum of each row, one program per row (rows up to one block wide).
Exercise 2: the same for rows of any width: loop over the row in chunks, carrying a running max.
Exercise 3: why softmax subtracts the maximum: the naive formula overflows.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# --8<-- [start:ex1]
@triton.jit
def row_max_kernel(x_ptr, out_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    # other=-inf, not 0: a padded lane must never win the max (think of a row of negatives).
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < N, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))  # a tree reduction across the block's lanes


def row_max(x: torch.Tensor) -> torch.Tensor:
    """The maximum of each row of 2-D ``x`` (any strides; rows up to 16384 wide)."""
    m, n = x.shape
    block = triton.next_power_of_2(n)
    if block > 16384:
        raise ValueError(f"row_max: rows of {n} do not fit one block; use row_max_looped")
    out = torch.empty(m, dtype=x.dtype, device=x.device)
    row_max_kernel[(m,)](x, out, n, *x.stride(), BLOCK_N=block)
    return out


# --8<-- [end:ex1]


# --8<-- [start:ex2]
@triton.jit
def row_max_looped_kernel(x_ptr, out_ptr, N, stride_xm, stride_xn, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    acc = tl.full((BLOCK_N,), -float("inf"), dtype=tl.float32)  # one running max per lane
    for start in range(0, N, BLOCK_N):  # a runtime loop: N need not be known at compile time
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < N, other=-float("inf"))
        acc = tl.maximum(acc, x.to(tl.float32))
    tl.store(out_ptr + row, tl.max(acc, axis=0).to(out_ptr.dtype.element_ty))  # reduce once


def row_max_looped(x: torch.Tensor, block_n: int = 1024) -> torch.Tensor:
    """The maximum of each row of 2-D ``x``, for rows of any width."""
    m, n = x.shape
    out = torch.empty(m, dtype=x.dtype, device=x.device)
    row_max_looped_kernel[(m,)](x, out, n, *x.stride(), BLOCK_N=block_n)
    return out


# --8<-- [end:ex2]


# --8<-- [start:ex3]
def softmax_overflow_demo(dtype: torch.dtype = torch.float16) -> dict[str, torch.Tensor]:
    """Softmax of logits that are large but harmless, computed two ways.

    fp16 overflows past exp(11.09) = 65504, fp32 past exp(88.7): exp(12) is inf in fp16, and
    inf / inf is NaN. Subtracting the row's maximum first makes every exponent <= 0, so every
    exp is in (0, 1] and the sum is at least 1; the result is the same in exact arithmetic.
    """
    logits = torch.tensor([10.0, 11.0, 12.0], dtype=dtype)
    e = torch.exp(logits)
    naive = e / e.sum()
    shifted = torch.exp(logits - logits.max())
    stable = shifted / shifted.sum()
    return {"naive": naive, "stable": stable}


# --8<-- [end:ex3]

"""Lesson 4 (loads, stores, masks, tl.constexpr): solutions.

Exercise 1: a masked scale-and-shift kernel, with an optional ReLU chosen at compile time.
Exercise 2: pad a vector to a longer one with ``tl.load(..., other=)``.
Exercise 3: one program over a vector of any length: the block must be a compile-time power
of two, so the host picks ``next_power_of_2(n)`` and masks the rest.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# --8<-- [start:ex1]
@triton.jit
def scale_shift_kernel(
    x_ptr, out_ptr, n, scale, shift, APPLY_RELU: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    offsets = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    y = tl.load(x_ptr + offsets, mask=mask).to(tl.float32) * scale + shift
    if APPLY_RELU:  # a constexpr branch: resolved at compile time, two kernels, no runtime test
        y = tl.maximum(y, 0.0)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def scale_shift(
    x: torch.Tensor, scale: float, shift: float, *, relu: bool = False, block_size: int = 1024
) -> torch.Tensor:
    """``x * scale + shift`` (then ReLU if ``relu``) for contiguous ``x``."""
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, block_size),)
    scale_shift_kernel[grid](
        x, out, n, float(scale), float(shift), APPLY_RELU=relu, BLOCK_SIZE=block_size
    )
    return out


# --8<-- [end:ex1]


# --8<-- [start:ex2]
@triton.jit
def pad_kernel(x_ptr, out_ptr, n, m, value, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # Two masks: the load stops at the input's end (lanes past it get `value`), the store at
    # the output's end.
    vals = tl.load(x_ptr + offsets, mask=offsets < n, other=value)
    tl.store(out_ptr + offsets, vals, mask=offsets < m)


def pad_to(x: torch.Tensor, m: int, value: float = 0.0, block_size: int = 256) -> torch.Tensor:
    """``x`` (1-D, contiguous, n elements) followed by ``m - n`` copies of ``value``."""
    n = x.numel()
    if m < n:
        raise ValueError(f"pad_to: m={m} is shorter than x ({n} elements)")
    out = torch.empty(m, dtype=x.dtype, device=x.device)
    pad_kernel[(triton.cdiv(m, block_size),)](x, out, n, m, value, BLOCK_SIZE=block_size)
    return out


# --8<-- [end:ex2]


# --8<-- [start:ex3]
MAX_BLOCK = 16384  # beyond this one program's registers are not enough: loop instead (lesson 8)


@triton.jit
def sum_one_block_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)  # tl.arange needs constexpr, power-of-two bounds
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)  # 0 is neutral for a sum
    tl.store(out_ptr, tl.sum(x.to(tl.float32), axis=0))


def sum_one_block(x: torch.Tensor) -> torch.Tensor:
    """The sum of a short vector (at most MAX_BLOCK elements) by a single program."""
    n = x.numel()
    if not 1 <= n <= MAX_BLOCK:
        raise ValueError(f"sum_one_block: need 1 to {MAX_BLOCK} elements, got {n}")
    block = triton.next_power_of_2(n)  # host side: each distinct value compiles one kernel
    out = torch.empty((), dtype=torch.float32, device=x.device)
    sum_one_block_kernel[(1,)](x, out, n, BLOCK_SIZE=block)
    return out


# --8<-- [end:ex3]

"""Lesson 3 (SPMD programs, 1-D grids, program ids, pointer arithmetic): solutions.

Exercise 1: how many programs does a 1-D grid need, and how many lanes of the last one work?
Exercise 2: reverse a vector (out[i] = x[n - 1 - i]) with pointer arithmetic.
Exercise 3: gather every k-th element (out[i] = x[i * k]).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# --8<-- [start:ex1]
def grid_for(n: int, block_size: int) -> tuple[int, int]:
    """(programs, active lanes in the last program) for ``n`` elements in blocks."""
    programs = (n + block_size - 1) // block_size  # = triton.cdiv(n, block_size)
    last = n - (programs - 1) * block_size if programs else 0
    return programs, last


# --8<-- [end:ex1]


# --8<-- [start:ex2]
@triton.jit
def reverse_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    # Read in order (coalesced), write mirrored: lane i of the block writes n - 1 - i, so
    # neighbouring lanes still write neighbouring addresses, just descending.
    vals = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + (n - 1 - offsets), vals, mask=mask)


def reverse(x: torch.Tensor, block_size: int = 256) -> torch.Tensor:
    """``x`` (1-D, contiguous) back to front."""
    out = torch.empty_like(x)
    n = x.numel()
    reverse_kernel[(triton.cdiv(n, block_size),)](x, out, n, BLOCK_SIZE=block_size)
    return out


# --8<-- [end:ex2]


# --8<-- [start:ex3]
@triton.jit
def every_kth_kernel(x_ptr, out_ptr, m, k, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < m  # m = cdiv(n, k) outputs; the mask is on the output index
    vals = tl.load(x_ptr + offsets * k, mask=mask)  # a stride of k elements between lanes
    tl.store(out_ptr + offsets, vals, mask=mask)


def every_kth(x: torch.Tensor, k: int, block_size: int = 256) -> torch.Tensor:
    """``x[::k]`` as a new contiguous tensor (x 1-D, contiguous; k >= 1)."""
    if k < 1:
        raise ValueError(f"every_kth: k must be >= 1, got {k}")
    m = triton.cdiv(x.numel(), k)
    out = torch.empty(m, dtype=x.dtype, device=x.device)
    every_kth_kernel[(triton.cdiv(m, block_size),)](x, out, m, k, BLOCK_SIZE=block_size)
    return out


# --8<-- [end:ex3]

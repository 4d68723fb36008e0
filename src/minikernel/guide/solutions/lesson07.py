"""Lesson 7 (2-D tensors and strides): solutions.

Exercise 1: compute by hand where each element of a view lives in its storage.
Exercise 2: a 2-D kernel that writes into a strided output (a transposed view, a slice).
Exercise 3: broadcast the other way: one bias value per row, added along that row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# --8<-- [start:ex1]
def view_offsets(t: torch.Tensor) -> torch.Tensor:
    """For a 2-D tensor, the storage index (in elements) of every element:
    ``storage_offset + i * stride[0] + j * stride[1]``, built by broadcasting a column of row
    offsets against a row of column offsets, exactly as a Triton kernel builds its pointers."""
    m, n = t.shape
    s0, s1 = t.stride()
    rows = torch.arange(m, dtype=torch.int64)[:, None] * s0
    cols = torch.arange(n, dtype=torch.int64)[None, :] * s1
    return t.storage_offset() + rows + cols


# --8<-- [end:ex1]


# --8<-- [start:ex2]
@triton.jit
def scale2d_kernel(
    x_ptr, out_ptr, M, N, alpha,
    stride_xm, stride_xn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    rows = (pid // tiles_n).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % tiles_n).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)
    y = (x.to(tl.float32) * alpha).to(out_ptr.dtype.element_ty)
    # The output has its own strides: the kernel never assumes a layout for it either.
    tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on, y, mask=mask)


def scale2d(x: torch.Tensor, alpha: float, out: torch.Tensor) -> torch.Tensor:
    """``out[i, j] = alpha * x[i, j]`` for 2-D ``x`` and ``out`` of one shape, any strides."""
    if x.dim() != 2 or out.shape != x.shape:
        raise ValueError(f"scale2d: need 2-D x and out of one shape, got {x.shape}, {out.shape}")
    m, n = x.shape
    grid = (triton.cdiv(m, 16) * triton.cdiv(n, 32),)
    scale2d_kernel[grid](
        x, out, m, n, float(alpha), *x.stride(), *out.stride(), BLOCK_M=16, BLOCK_N=32
    )
    return out


# --8<-- [end:ex2]


# --8<-- [start:ex3]
@triton.jit
def add_row_bias_kernel(
    x_ptr, b_ptr, out_ptr, M, N,
    stride_xm, stride_xn, stride_b,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    rows = (pid // tiles_n).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % tiles_n).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)
    b = tl.load(b_ptr + rows * stride_b, mask=rows < M)  # one value per row ...
    y = x.to(tl.float32) + b.to(tl.float32)[:, None]  # ... broadcast along the row: [M, 1]
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def add_row_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x + b[:, None]`` (x 2-D with any strides, b 1-D with one value per row) into a new
    contiguous tensor."""
    if x.dim() != 2 or b.shape != (x.shape[0],):
        raise ValueError(f"add_row_bias: need x (M, N) and b (M,), got {x.shape}, {b.shape}")
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(m, 16) * triton.cdiv(n, 64),)
    add_row_bias_kernel[grid](
        x, b, out, m, n, *x.stride(), b.stride(0), BLOCK_M=16, BLOCK_N=64
    )  # fmt: skip
    return out


# --8<-- [end:ex3]

"""Add a bias to every row of a 2-D tensor of any strides: ``out[i, j] = x[i, j] + bias[j]``.

Versions (the registry key is triton:N):
  add_bias_kernel1  one program per BLOCK_M x BLOCK_N tile; the program loads its BLOCK_N bias
                    values once and broadcasts them over its BLOCK_M rows

Byte model: (2 * M * N + N) * element size: x read and out written once; the bias read once
from DRAM (each column of tiles reads it again, but from L2).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

TILE = (16, 256)  # (BLOCK_M, BLOCK_N): wide along the rows, where memory is contiguous
NUM_WARPS = 4


# --8<-- [start:kernel1]
@triton.jit
def add_bias_kernel1(
    x_ptr, bias_ptr, out_ptr, M, N,
    stride_xm, stride_xn, stride_b, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // tiles_n, pid % tiles_n
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)
    # BLOCK_N bias values, loaded once and reused by all BLOCK_M rows of the tile.
    bias = tl.load(bias_ptr + cols * stride_b, mask=cols < N)
    # [BLOCK_M, BLOCK_N] + [1, BLOCK_N]: the bias row is broadcast down the tile. Added in
    # fp32 and rounded once on the store, as torch's x + bias does for fp16 / bf16.
    y = x.to(tl.float32) + bias.to(tl.float32)[None, :]
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch_kernel1(x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bm, bn = TILE
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    add_bias_kernel1[grid](
        x, bias, out, m, n, *x.stride(), bias.stride(0), *out.stride(),
        BLOCK_M=bm, BLOCK_N=bn, num_warps=NUM_WARPS,
    )  # fmt: skip
    return out


# --8<-- [end:kernel1]

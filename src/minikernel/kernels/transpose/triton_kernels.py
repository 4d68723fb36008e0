"""2-D copy and transpose in Triton, on tensors of any strides (lesson 7).

Every kernel takes each tensor as a base pointer plus one stride per dimension, so a
transposed view, a slice with a step or a column of a larger matrix all work without a
``.contiguous()`` first: element (i, j) of x lives at ``x_ptr + i * stride_xm + j * stride_xn``.

Versions (the registry key is triton:N):
  copy2d_kernel      out[i, j] = x[i, j], one program per BLOCK_M x BLOCK_N tile (not a rung:
                     the 2-D copy the lesson starts from)
  transpose_kernel1  naive: one program per run of BLOCK_N elements of one row of x; the load
                     is coalesced, the store walks down a column of out, one element every
                     M * element size bytes, so every lane writes its own 32-byte sector
  transpose_kernel2  tiled: one program per BLOCK_M x BLOCK_N tile, loaded along the rows of x
                     and stored, transposed, along the rows of out; Triton stages the tile
                     through shared memory between the two, so both sides are coalesced

Byte model (all three): 2 * M * N * element size (read x once, write out once).
Offsets are int64: M * N may pass 2^31 elements.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

COPY2D_TILE = (32, 64)  # (BLOCK_M, BLOCK_N)
NAIVE_BLOCK_N = 1024
TILED_TILE = (64, 64)
NUM_WARPS = 4


def _flat_grid(m: int, n: int, block_m: int, block_n: int) -> tuple[int]:
    # A 1-D grid of tiles, row of tiles after row of tiles. (A 2-D grid would cap the second
    # axis at 65535 tiles.)
    return (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)


# --8<-- [start:copy2d]
@triton.jit
def copy2d_kernel(
    x_ptr, out_ptr, M, N,
    stride_xm, stride_xn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // tiles_n, pid % tiles_n  # this program's tile: row pid_m, column pid_n
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M]
    cols = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    # Broadcasting a column of row offsets against a row of column offsets gives the
    # BLOCK_M x BLOCK_N grid of addresses; the mask clips both the bottom and the right edge.
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on, tile, mask=mask)


def launch_copy2d(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bm, bn = COPY2D_TILE
    copy2d_kernel[_flat_grid(m, n, bm, bn)](
        x, out, m, n, *x.stride(), *out.stride(), BLOCK_M=bm, BLOCK_N=bn, num_warps=NUM_WARPS
    )
    return out


# --8<-- [end:copy2d]


# --8<-- [start:kernel1]
@triton.jit
def transpose_kernel1(
    x_ptr, out_ptr, M, N,
    stride_xm, stride_xn, stride_om, stride_on,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    blocks_n = tl.cdiv(N, BLOCK_N)
    row = (pid // blocks_n).to(tl.int64)  # one row of x ...
    cols = (pid % blocks_n).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)  # ... BLOCK_N columns
    mask = cols < N
    # Load: neighbouring lanes read neighbouring addresses (when stride_xn == 1): coalesced.
    vals = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask)
    # Store: out[j, row] = x[row, j]. Neighbouring lanes are stride_om elements apart (M, for a
    # contiguous out), so a warp's 32 stores touch 32 sectors of 32 bytes to write 128 bytes.
    tl.store(out_ptr + cols * stride_om + row * stride_on, vals, mask=mask)


def launch_kernel1(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    grid = (m * triton.cdiv(n, NAIVE_BLOCK_N),)
    transpose_kernel1[grid](
        x, out, m, n, *x.stride(), *out.stride(), BLOCK_N=NAIVE_BLOCK_N, num_warps=NUM_WARPS
    )
    return out


# --8<-- [end:kernel1]


# --8<-- [start:kernel2]
@triton.jit
def transpose_kernel2(
    x_ptr, out_ptr, M, N,
    stride_xm, stride_xn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // tiles_n, pid % tiles_n
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    # Load a BLOCK_M x BLOCK_N tile along the rows of x: coalesced.
    mask_x = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask_x)
    # Store the BLOCK_N x BLOCK_M transposed tile along the rows of out: coalesced too.
    # tl.trans moves each value to the thread that stores it, through shared memory
    # (BLOCK_M * BLOCK_N * element size bytes of it per program).
    mask_o = (cols[:, None] < N) & (rows[None, :] < M)
    out_ptrs = out_ptr + cols[:, None] * stride_om + rows[None, :] * stride_on
    tl.store(out_ptrs, tl.trans(tile), mask=mask_o)


def launch_kernel2(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bm, bn = TILED_TILE
    transpose_kernel2[_flat_grid(m, n, bm, bn)](
        x, out, m, n, *x.stride(), *out.stride(), BLOCK_M=bm, BLOCK_N=bn, num_warps=NUM_WARPS
    )
    return out


# --8<-- [end:kernel2]

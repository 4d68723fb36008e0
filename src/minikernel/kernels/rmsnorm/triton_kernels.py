"""RMSNorm in Triton: forward (two rungs) and backward (dx and a deterministic dweight).

    y = x * rstd * w,   rstd = 1 / sqrt(mean(x**2) + eps)      (one rstd per row of N elements)

Byte models (element size b, weight element size bw):
    forward   read x, write y              2*M*N*b + N*bw
    backward  read x and dy, write dx      3*M*N*b + 2*N*bw   (read w, write dw)

Rungs:
    rmsnorm_kernel1   one row per program, the whole row in one block of registers
    rmsnorm_kernel2   several rows per program for short rows; for rows too long for registers,
                      two passes over the row, the second from the end so it re-reads from L2
Backward (used by every rung's autograd):
    rmsnorm_bwd_kernel        rows that fit in registers: persistent programs, each keeps a
                              running dweight for its rows in registers and writes it once
    rmsnorm_bwd_rowdot_kernel / rmsnorm_bwd_cols_kernel
                              longer rows: the row reduction first, then column blocks
    rmsnorm_dw_kernel         sums the per-program dweight partials in a fixed order: the same
                              inputs always give the same bits (no atomics)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

# A row whose fp32 copy spreads over a program's registers at ~16 values per thread, at most
# 32 warps: 16384 elements. Longer rows are walked in tiles, except the lengths the measured
# launch table (_FWD_WHOLE_ROW below) holds in one program.
MAX_REGISTER_ROW = 16384
# rmsnorm_kernel1 puts the whole row in one block, whatever its length; past this it would
# spill to local memory so much that it is refused (kernel2 handles any length).
KERNEL1_MAX_N = 65536


# --8<-- [start:kernel1]
@triton.jit
def rmsnorm_kernel1(
    x_ptr, w_ptr, y_ptr, rstd_ptr, N, eps, HAS_W: tl.constexpr, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)  # int64: row * N passes 2^31 on large inputs
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    # Read the row once (N * b bytes) and keep it in registers, in fp32.
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)  # masked lanes hold 0: they add nothing
    y = x * rstd
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    # Write it once (N * b bytes), rounding to the output dtype a single time.
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)  # 4 bytes per row, kept for the backward pass


# --8<-- [end:kernel1]


# --8<-- [start:kernel2]
@triton.jit
def rmsnorm_kernel2(
    x_ptr,
    w_ptr,
    y_ptr,
    rstd_ptr,
    M,
    N,
    eps,
    HAS_W: tl.constexpr,
    ROWS: tl.constexpr,  # rows per program (short rows: one row is too little work)
    BLOCK_N: tl.constexpr,  # columns per tile
    TILED: tl.constexpr,  # the row does not fit in one tile: walk it twice
    RELOAD: tl.constexpr = False,  # whole rows, but x loaded again after the sum (see below)
):
    pid = tl.program_id(0).to(tl.int64)
    if not TILED:
        # ROWS whole rows in one tile: x is read from DRAM once and y written once.
        rows = pid * ROWS + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK_N)
        row_ok = rows < M
        mask = row_ok[:, None] & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        if RELOAD:
            # Load, sum, then load the same lines again (from L1/L2, still there: evict_last)
            # instead of keeping x live in registers across the block-wide sum. Measured faster
            # on the H200 for rows of 2048 to 16384 elements (_FWD_WHOLE_ROW below); section 3
            # of the fused-RMSNorm page gives ncu's registers and occupancy with and without it.
            x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
            x = x.to(tl.float32)
            rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
            x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
            x = x.to(tl.float32)
        else:
            # No evict_first on a once-read x: the hint slowed softmax's identical load on the H200.
            x = tl.load(x_ptr + offs, mask=mask, other=0.0)
            x = x.to(tl.float32)
            rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
        y = x * rstd[:, None]
        if HAS_W:  # N * bw bytes per program, from L2 after the first programs
            w = tl.load(w_ptr + cols, mask=cols < N, other=0.0, eviction_policy="evict_last")
            y = y * w.to(tl.float32)[None, :]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(rstd_ptr + rows, rstd, mask=row_ok)
    else:
        # One long row per program. Pass 1 reads it tile by tile for the sum of squares and asks
        # L2 to keep the lines (evict_last). Pass 2 walks the tiles from the LAST one back: the
        # most recently read tiles are the likeliest still in L2, so the second read of x
        # mostly costs L2 bandwidth, not DRAM bandwidth.
        x_row = x_ptr + pid * N
        y_row = y_ptr + pid * N
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            x = tl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_last")
            x = x.to(tl.float32)
            acc += x * x  # per-lane partial sums; one block-wide reduction after the loop
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        n_tiles = tl.cdiv(N, BLOCK_N)
        for i in range(0, n_tiles):
            cols = (n_tiles - 1 - i) * BLOCK_N + tl.arange(0, BLOCK_N)
            mask = cols < N
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            y = x.to(tl.float32) * rstd
            if HAS_W:
                w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last")
                y = y * w.to(tl.float32)
            # y is not read again: evict_first, so it does not push out the x of other rows
            tl.store(
                y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first"
            )
        tl.store(rstd_ptr + pid, rstd)


# --8<-- [end:kernel2]


# --8<-- [start:backward]
@triton.jit
def rmsnorm_bwd_kernel(
    dy_ptr,
    x_ptr,
    w_ptr,
    rstd_ptr,
    dx_ptr,
    dw_part_ptr,  # (programs, N) fp32: this program's share of dweight
    M,
    N,
    rows_per_program,
    HAS_W: tl.constexpr,
    W_IN_REGISTERS: tl.constexpr,  # short rows: keep w; long ones: re-read it (L1/L2 hit)
    PREFETCH: tl.constexpr,  # load the next rows while reducing these
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # With xhat = x * rstd and g = dy * w:
    #   dx = rstd * (g - xhat * mean(g * xhat))      (one reduction per row)
    #   dw = sum over rows of dy * xhat              (one reduction per column)
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    if HAS_W and W_IN_REGISTERS:
        w_keep = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)  # summed over its ROWS axis at the end
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    if PREFETCH:
        # The row reduction below stops every warp at a barrier; the next rows' loads are
        # issued before it, so they are in flight meanwhile (past the last rows the mask
        # reads nothing). It costs registers: only for tiles of a few elements per thread.
        offs0 = (first + tl.arange(0, ROWS))[:, None] * N + cols[None, :]
        mask0 = ((first + tl.arange(0, ROWS)) < last)[:, None] & col_ok[None, :]
        x_next = tl.load(x_ptr + offs0, mask=mask0, other=0.0)
        dy_next = tl.load(dy_ptr + offs0, mask=mask0, other=0.0)
    for r0 in range(first, last, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        row_ok = rows < last
        mask = row_ok[:, None] & col_ok[None, :]
        offs = rows[:, None] * N + cols[None, :]
        if PREFETCH:
            x, dy = x_next, dy_next
            mask_next = (rows + ROWS < last)[:, None] & col_ok[None, :]
            x_next = tl.load(x_ptr + offs + ROWS * N, mask=mask_next, other=0.0)
            dy_next = tl.load(dy_ptr + offs + ROWS * N, mask=mask_next, other=0.0)
        else:
            # x and dy are read once; no evict_first (see the forward)
            x = tl.load(x_ptr + offs, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + offs, mask=mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
        xhat = x.to(tl.float32) * rstd[:, None]
        dy = dy.to(tl.float32)
        if HAS_W:
            if W_IN_REGISTERS:
                w = w_keep
            else:
                w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last")
                w = w.to(tl.float32)
            g = dy * w[None, :]
            dw_acc += dy * xhat
        else:
            g = dy
        c = tl.sum(g * xhat, axis=1) / N
        dx = (g - xhat * c[:, None]) * rstd[:, None]
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    if HAS_W:
        tl.store(dw_part_ptr + pid.to(tl.int64) * N + cols, tl.sum(dw_acc, axis=0), mask=col_ok)


@triton.jit
def rmsnorm_bwd_rowdot_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, c_ptr, N, HAS_W: tl.constexpr, BLOCK_N: tl.constexpr
):
    # Long rows, step 1: c = mean(g * xhat) for one row, walking it in tiles.
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(dy_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            g = g * tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(
                tl.float32
            )
        acc += g * x
    rstd = tl.load(rstd_ptr + row)
    tl.store(c_ptr + row, tl.sum(acc, axis=0) * rstd / N)


@triton.jit
def rmsnorm_bwd_cols_kernel(
    dy_ptr,
    x_ptr,
    w_ptr,
    rstd_ptr,
    c_ptr,
    dx_ptr,
    dw_part_ptr,  # (row groups, N) fp32
    M,
    N,
    rows_per_program,
    HAS_W: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # Long rows, step 2: program (column block, row group) computes dx on its block, for each
    # row of its group, and sums dy * xhat down its columns for dweight.
    cols = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    group = tl.program_id(1)
    col_ok = cols < N
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)
    first = group.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    for r0 in range(first, last, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        row_ok = rows < last
        mask = row_ok[:, None] & col_ok[None, :]
        offs = rows[:, None] * N + cols[None, :]
        xhat = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
        c = tl.load(c_ptr + rows, mask=row_ok, other=0.0)
        xhat = xhat * rstd[:, None]
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            g = dy * w[None, :]
            dw_acc += dy * xhat
        else:
            g = dy
        dx = (g - xhat * c[:, None]) * rstd[:, None]
        tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    if HAS_W:
        tl.store(dw_part_ptr + group.to(tl.int64) * N + cols, tl.sum(dw_acc, axis=0), mask=col_ok)


@triton.jit
def rmsnorm_dw_kernel(part_ptr, dw_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    # dweight = sum of the P partial rows, always added in the same order: deterministic.
    cols = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        mask = (p < P)[:, None] & col_ok[None, :]
        acc += tl.load(part_ptr + p[:, None].to(tl.int64) * N + cols[None, :], mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(acc, axis=0).to(dw_ptr.dtype.element_ty), mask=col_ok)


# --8<-- [end:backward]


# --------------------------------------------------------------------------------------------
# Launch parameters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FwdConfig:
    rows: int
    block_n: int
    tiled: bool
    num_warps: int
    reload: bool = False  # whole rows (tiled=False) whose x is loaded a second time


def _warps(elements: int, elem_size: int) -> int:
    """Warps for a block of ``elements``: about two 16-byte accesses per thread (32 bytes),
    between 1 and 32 warps (1024 threads, the most a program can have)."""
    return max(1, min(32, triton.next_power_of_2(max(1, elements * elem_size // 1024))))


# Whole-row launches measured on the H200 (labs/sweep_rmsnorm_forward.py prints the same sweep
# for your GPU): (element size, BLOCK_N) -> (rows per program, warps, reload). Two patterns:
# - From 2048 elements on, loading x again after the sum (RELOAD) beat keeping it in registers
#   by 2-4 %, at the same DRAM bytes: the second load hits L1/L2.
# - Warps are not monotone: 8 warps at 16384 bf16 (eight 16-byte vectors per thread) beat 16 by
#   far and 32 by 8 %; at 64 KB per row (16384 fp32) only 32 warps keep the registers low.
# Three longer rows past MAX_REGISTER_ROW (sweep_rmsnorm_forward.py --n 32768 65536, 2026-12-02)
# ran faster whole than the lab had timed them walked twice in tiles: 32768 and 65536 bf16 by a
# quarter to a third, 32768 fp32 by several per cent. 65536 fp32 did not (whole, 64 fp32 values
# a thread: far slower).
_FWD_WHOLE_ROW: dict[tuple[int, int], tuple[int, int, bool]] = {
    (2, 1024): (4, 4, False),
    (2, 2048): (2, 8, True),
    (2, 4096): (1, 8, True),
    (2, 8192): (1, 16, True),
    (2, 16384): (1, 8, True),
    (2, 32768): (1, 16, False),
    (2, 65536): (1, 32, True),
    (4, 1024): (2, 4, False),
    (4, 2048): (2, 16, True),
    (4, 4096): (1, 16, True),
    (4, 8192): (1, 8, True),
    (4, 16384): (1, 32, True),
    (4, 32768): (1, 32, False),
}


def fwd_config(n: int, elem_size: int) -> FwdConfig:
    """How rmsnorm_kernel2 covers rows of ``n`` elements of ``elem_size`` bytes."""
    block = triton.next_power_of_2(n)
    if (elem_size, block) in _FWD_WHOLE_ROW:
        rows, warps, reload = _FWD_WHOLE_ROW[elem_size, block]
        return FwdConfig(rows, block, False, warps, reload)
    if block <= MAX_REGISTER_ROW:
        # Shorter rows: pack them so a program moves at least 4096 elements (8-16 KB for
        # 16-bit, 16 KB for fp32): enough bytes in flight per program, fewer tiny programs.
        rows = max(1, min(64, 4096 // block))
        return FwdConfig(rows, block, False, _warps(rows * block, elem_size))
    # Long rows: tiles of 32 KB over 32 warps, so one program fills an SM and only about one row
    # per SM is in flight: the rows being re-read must fit in L2 together.
    return FwdConfig(1, 32768 // elem_size, True, 32)


def kernel1_config(n: int) -> tuple[int, int]:
    block = triton.next_power_of_2(n)
    if block > KERNEL1_MAX_N:
        raise ValueError(
            f"rmsnorm: triton:1 keeps the whole row in one block and takes rows of at most "
            f"{KERNEL1_MAX_N} elements, got {n}; use triton:2, which walks long rows in tiles"
        )
    return block, max(1, min(32, block // 512))


def sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter: few programs, so CPU tests stay fast
    return torch.cuda.get_device_properties(device).multi_processor_count


# --------------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------------


def launch_kernel1(
    x: torch.Tensor, w: torch.Tensor | None, y: torch.Tensor, rstd: torch.Tensor, eps: float
) -> torch.Tensor:
    m, n = x.shape
    block, warps = kernel1_config(n)
    rmsnorm_kernel1[(m,)](
        x,
        w if w is not None else x,
        y,
        rstd,
        n,
        eps,
        HAS_W=w is not None,
        BLOCK_N=block,
        num_warps=warps,
    )
    return y


def launch_kernel2(
    x: torch.Tensor, w: torch.Tensor | None, y: torch.Tensor, rstd: torch.Tensor, eps: float
) -> torch.Tensor:
    m, n = x.shape
    cfg = fwd_config(n, x.element_size())
    grid = (m if cfg.tiled else triton.cdiv(m, cfg.rows),)
    rmsnorm_kernel2[grid](
        x,
        w if w is not None else x,
        y,
        rstd,
        m,
        n,
        eps,
        HAS_W=w is not None,
        ROWS=cfg.rows,
        BLOCK_N=cfg.block_n,
        TILED=cfg.tiled,
        RELOAD=cfg.reload,
        num_warps=cfg.num_warps,
    )
    return y


def launch_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor | None,
    rstd: torch.Tensor,
    dx: torch.Tensor,
    *,
    need_dw: bool = True,
) -> torch.Tensor | None:
    """dx into ``dx``; returns dweight (in w's dtype) or None. All (M, N) tensors contiguous."""
    m, n = x.shape
    has_w = w is not None
    w_arg = w if has_w else x
    block = triton.next_power_of_2(n)
    sms = sm_count(x.device)
    if block <= MAX_REGISTER_ROW:
        rows = max(1, min(64, 4096 // block))
        # x, dy, g and the running dweight all live in fp32 here: twice the threads of the
        # forward pass for the same tile (one 16-byte access per thread and tensor) keeps them
        # in registers without spilling.
        warps = _warps(rows * block, 2 * x.element_size())
        per_sm = max(1, 64 // warps)  # 64 warps = 2048 threads, an SM's limit
        if 1024 <= block <= 8192:
            # Rows of 513 to 8192: one program per SM, 8192 elements per step (8 or 4 rows
            # over 8 warps at 1024 and 2048, 2 rows over 16 at 4096, 1 row over 32 at 8192).
            # Every step ends in row reductions across the program's warps (a barrier); fewer,
            # fuller steps per SM, each with the next step's loads already in flight (PREFETCH),
            # measured faster on the H200 than the other rows/warps/programs-per-SM mixes of a
            # sweep, by the most at 1024 columns (the lab re-measured the rule).
            rows = 8192 // block
            warps, per_sm = max(8, block // 256), 1
        programs = max(1, min(triton.cdiv(m, rows), sms * per_sm))
        rows_per_program = triton.cdiv(triton.cdiv(m, programs), rows) * rows
        programs = triton.cdiv(m, rows_per_program)
        part = torch.empty((programs, n), dtype=torch.float32, device=x.device) if has_w else x
        rmsnorm_bwd_kernel[(programs,)](
            dy,
            x,
            w_arg,
            rstd,
            dx,
            part,
            m,
            n,
            rows_per_program,
            HAS_W=has_w,
            W_IN_REGISTERS=block <= 4096,
            PREFETCH=rows * block <= 8192,
            ROWS=rows,
            BLOCK_N=block,
            num_warps=warps,
        )
    else:
        c = torch.empty(m, dtype=torch.float32, device=x.device)
        tile = 32768 // x.element_size()
        rmsnorm_bwd_rowdot_kernel[(m,)](
            dy, x, w_arg, rstd, c, n, HAS_W=has_w, BLOCK_N=tile, num_warps=32
        )
        block_n, rows = 2048, 4
        col_blocks = triton.cdiv(n, block_n)
        groups = max(1, min(triton.cdiv(m, rows), triton.cdiv(4 * sms, col_blocks)))
        rows_per_program = triton.cdiv(triton.cdiv(m, groups), rows) * rows
        groups = triton.cdiv(m, rows_per_program)
        part = torch.empty((groups, n), dtype=torch.float32, device=x.device) if has_w else x
        rmsnorm_bwd_cols_kernel[(col_blocks, groups)](
            dy,
            x,
            w_arg,
            rstd,
            c,
            dx,
            part,
            m,
            n,
            rows_per_program,
            HAS_W=has_w,
            ROWS=rows,
            BLOCK_N=block_n,
            num_warps=_warps(rows * block_n, 4),
        )
        programs = groups
    if not (has_w and need_dw):
        return None
    return reduce_dw(part[:programs], w.dtype)


def reduce_dw(part: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """dweight from the (P, N) fp32 partial sums of a backward kernel: their column sums, added
    in a fixed order (deterministic), in ``dtype``. Shared by the Triton and CUDA backwards."""
    programs, n = part.shape
    dw = torch.empty(n, dtype=dtype, device=part.device)
    # Up to 256 partial rows (one per SM or per cluster, as the backwards above write them) in
    # one tile of 256 x 16, so each program issues all its loads at once and reduces: 5.3 us
    # for 132 x 1024 on the H200 in a side probe, where 32-row steps over 256 columns took 13.8
    # (four programs, each waiting on five loads in turn). More rows than that loop in steps.
    block_p = min(256, triton.next_power_of_2(programs))
    block_c = 4096 // block_p
    rmsnorm_dw_kernel[(triton.cdiv(n, block_c),)](
        part, dw, programs, n, BLOCK_P=block_p, BLOCK_N=block_c, num_warps=4
    )
    return dw

"""Lesson 9 (GEMM tiling and fusion): solutions.

Exercise 1: the tile model: global-memory traffic and arithmetic intensity of a tiled GEMM.
Exercise 2: a bias + ReLU epilogue applied to the accumulator tile, and a small tiled
``relu(x @ w + b)`` that uses it (the course's real GEMM is the matmul lab's).
Exercise 3: the bytes fusion saves: GEMM, then bias, then ReLU, against all three in one.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# --8<-- [start:ex1]
def gemm_tile_traffic(
    m: int, n: int, k: int, block_m: int, block_n: int, element_size: int = 2
) -> dict[str, float]:
    """Bytes a tiled ``C = A @ B`` (A: m x k, B: k x n) moves, if every tile is read from
    global memory (no L2 reuse).

    Each of the cdiv(m, BM) x cdiv(n, BN) programs reads a BM x k strip of A and a k x BN
    strip of B and writes its BM x BN tile of C. So A is read once per column of tiles and B
    once per row of tiles: bigger tiles, fewer re-reads, higher intensity.
    """
    tiles_m, tiles_n = -(-m // block_m), -(-n // block_n)
    a_bytes = m * k * tiles_n * element_size
    b_bytes = k * n * tiles_m * element_size
    c_bytes = m * n * element_size
    total = a_bytes + b_bytes + c_bytes
    flops = 2 * m * n * k
    return {"programs": tiles_m * tiles_n, "bytes": total, "intensity": flops / total}


# --8<-- [end:ex1]


# --8<-- [start:ex2]
@triton.jit
def bias_relu_epilogue(acc, bias_ptr, cols, N):
    """The epilogue: ``acc`` (a [BLOCK_M, BLOCK_N] fp32 accumulator tile) + bias, then ReLU,
    while the tile is still in registers: no extra trip to memory."""
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    return tl.maximum(acc + bias[None, :], 0.0)


@triton.jit
def linear_bias_relu_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
    stride_xm, stride_xk, stride_wk, stride_wn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    rows = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):  # march along K, one BLOCK_K slice of A and B at a time
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(
            x_ptr + rows[:, None] * stride_xm + ks[None, :] * stride_xk,
            mask=(rows[:, None] < M) & (ks[None, :] < K),
            other=0.0,  # zeros past K add nothing to the dot product
        )
        b = tl.load(
            w_ptr + ks[:, None] * stride_wk + cols[None, :] * stride_wn,
            mask=(ks[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b, input_precision="ieee")  # fp32 inputs: full fp32, not TF32
    y = bias_relu_epilogue(acc, b_ptr, cols, N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)


def linear_bias_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``relu(x @ w + b)`` for float32 x (M, K), w (K, N), b (N,), any strides."""
    (m, k), (k2, n) = x.shape, w.shape
    if k != k2 or b.shape != (n,):
        raise ValueError(f"linear_bias_relu: shapes {x.shape} @ {w.shape} + {b.shape} mismatch")
    if not x.dtype == w.dtype == b.dtype == torch.float32:
        raise TypeError("linear_bias_relu: this exercise takes float32 tensors")
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    bm = bn = bk = 16  # tl.dot needs tiles of at least 16 on each side
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    linear_bias_relu_kernel[grid](
        x, w, b, out, m, n, k, *x.stride(), *w.stride(), *out.stride(),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
    )  # fmt: skip
    return out


# --8<-- [end:ex2]


# --8<-- [start:ex3]
def epilogue_fusion_savings(m: int, n: int, element_size: int = 2) -> dict[str, int]:
    """Bytes of the epilogue ``relu(C + b)`` after a GEMM, unfused and fused.

    Unfused: the bias kernel reads C and b and writes C + b, the ReLU kernel reads that and
    writes the result: 4 * m * n + n elements, and two extra launches. Fused into the GEMM's
    epilogue: only the bias is read (n elements); C is written once either way.
    """
    unfused = (4 * m * n + n) * element_size
    fused = n * element_size
    return {"unfused": unfused, "fused": fused, "saved": unfused - fused, "launches_saved": 2}


# --8<-- [end:ex3]

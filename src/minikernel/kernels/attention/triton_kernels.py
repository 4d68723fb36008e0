"""Attention forward in Triton, FlashAttention-2 style: O = softmax(Q K^T * scale) V.

One program computes BLOCK_M rows of O for one (batch, head). It keeps its Q tile on chip and
streams the head's K and V in blocks of BLOCK_N rows; each block updates a running row max m,
a running sum of exponentials l and an unnormalised output acc (the online softmax), so the
S x S score matrix is never written to memory.

FLOP model: two matrix products of 2 * S * S * D each per head, 4 * B * H * S * S * D in all;
half of that when causal, since the blocks above the diagonal are skipped, not computed.
Byte model (the lower bound): read Q, K, V and write O once, 4 * B * H * S * D elements; at
D = 128 that is S / 2 flops per byte, so from S ~ 1K on the tensor cores, not HBM, set the pace.

What this kernel does for Hopper (sm_90):
  * K and V blocks come in through the tensor memory accelerator (TMA) from host-made tensor
    descriptors; the compiler pipelines them num_stages deep while the tensor cores (wgmma)
    work on the current block.
  * exp2 instead of exp, with the softmax scale folded into log2(e): one multiply-add per score.
  * Blocks are classified before the loops: whole blocks left of the diagonal run without any
    mask; only the blocks on the diagonal (causal) and the one block that crosses the end of the
    sequence pay for masking; blocks right of the diagonal are never visited.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))

# Mask modes of one K/V block (see _attend_block).
FULL: tl.constexpr = tl.constexpr(0)  # every column visible to every row: no mask at all
DIAGONAL: tl.constexpr = tl.constexpr(1)  # causal mask only; all columns are < seq_k
TAIL: tl.constexpr = tl.constexpr(2)  # columns past seq_k masked (and causal, if causal)


# --8<-- [start:kernel1]
@triton.jit
def _attend_block(
    acc,
    m_i,
    l_i,
    q,
    k_desc,
    v_desc,
    kv_row,
    start_n,
    offs_m,
    seq_k,
    qk_scale,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    MODE: tl.constexpr,
):
    """One step of the online softmax: fold K/V rows [start_n, start_n + BLOCK_N) into acc."""
    k = k_desc.load([kv_row + start_n, 0])  # [BLOCK_N, D] through TMA
    qk = tl.dot(q, k.T)  # [BLOCK_M, BLOCK_N] scores, fp32 accumulators
    if MODE == FULL:
        # Scale folded into the max and the subtraction: one FMA per score, no extra pass.
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_new[:, None]
    else:
        offs_n = start_n + tl.arange(0, BLOCK_N)
        if MODE == DIAGONAL:
            visible = offs_m[:, None] >= offs_n[None, :]
        else:  # TAIL: rows past seq_k in this block belong to the next head, or are padding
            visible = offs_n[None, :] < seq_k
            if CAUSAL:
                visible = visible & (offs_m[:, None] >= offs_n[None, :])
        qk = tl.where(visible, qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # finite: column 0 <= every row was seen first
        qk = qk - m_new[:, None]
    p = tl.math.exp2(qk)  # log2 domain: exp2(x * scale * log2 e - m) = exp(...)
    alpha = tl.math.exp2(m_i - m_new)  # rescales what was summed under the old max
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = v_desc.load([kv_row + start_n, 0])  # [BLOCK_N, D]
    if MODE == TAIL:
        # P is exactly 0 on those rows, but 0 * inf = NaN: rows past seq_k (another head's
        # data) must not reach the product.
        v = tl.where((offs_n < seq_k)[:, None], v, 0.0)
    acc = tl.dot(p.to(v.dtype), v, acc)  # P in 16 bits for the tensor cores, as FA2 does
    return acc, m_new, l_i


@triton.jit(do_not_specialize=["seq_q", "seq_k"])  # one compile serves every length
def attention_kernel1(
    q_desc,
    k_desc,
    v_desc,
    o_ptr,
    seq_q,
    seq_k,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)  # diagonal blocks tile the query block exactly
    # A 1-D grid: tiles of one head are neighbours, so the programs running at the same time
    # share that head's K and V in L2. Causal: the longest rows (highest m) start first.
    pid = tl.program_id(0)
    num_m_blocks = tl.cdiv(seq_q, BLOCK_M)
    bh = pid // num_m_blocks
    start_m = pid % num_m_blocks
    if CAUSAL:
        start_m = num_m_blocks - 1 - start_m
    q_lo = start_m * BLOCK_M
    offs_m = q_lo + tl.arange(0, BLOCK_M)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Rows past seq_q read the next head's rows (or TMA's zero fill): harmless, never stored.
    q = q_desc.load([bh * seq_q + q_lo, 0])
    kv_row = bh * seq_k

    # Classify the K/V blocks once, so that the main loop carries no mask.
    full_end = (seq_k // BLOCK_N) * BLOCK_N  # blocks whose columns are all < seq_k
    if CAUSAL:
        hi = tl.minimum(q_lo + BLOCK_M, seq_k)  # no row of this tile sees a column >= hi
        unmasked_end = tl.minimum(q_lo, full_end)  # left of the diagonal
        diag_end = tl.minimum(q_lo + BLOCK_M, full_end)
    else:
        hi = seq_k
        unmasked_end = full_end
        diag_end = full_end

    for start_n in range(0, unmasked_end, BLOCK_N):
        acc, m_i, l_i = _attend_block(
            acc,
            m_i,
            l_i,
            q,
            k_desc,
            v_desc,
            kv_row,
            start_n,
            offs_m,
            seq_k,
            qk_scale,
            BLOCK_N,
            CAUSAL,
            FULL,
        )
    if CAUSAL:
        for start_n in range(unmasked_end, diag_end, BLOCK_N):
            acc, m_i, l_i = _attend_block(
                acc,
                m_i,
                l_i,
                q,
                k_desc,
                v_desc,
                kv_row,
                start_n,
                offs_m,
                seq_k,
                qk_scale,
                BLOCK_N,
                CAUSAL,
                DIAGONAL,
            )
    if full_end < hi:  # the last block crosses the end of the sequence
        acc, m_i, l_i = _attend_block(
            acc,
            m_i,
            l_i,
            q,
            k_desc,
            v_desc,
            kv_row,
            full_end,
            offs_m,
            seq_k,
            qk_scale,
            BLOCK_N,
            CAUSAL,
            TAIL,
        )

    out = acc / l_i[:, None]
    # O goes out through plain masked stores: a descriptor store of the padding rows would
    # overwrite the first rows of the next head.
    rows = (bh * seq_q + offs_m).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM)
    o_ptrs = o_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=(offs_m < seq_q)[:, None])


# --8<-- [end:kernel1]


# --8<-- [start:configs1]
def _set_block_shapes(nargs: dict) -> None:
    """Before each launch: the descriptors' box sizes follow the config being tried."""
    bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    nargs["q_desc"].block_shape = [bm, d]
    nargs["k_desc"].block_shape = [bn, d]
    nargs["v_desc"].block_shape = [bn, d]


def _config(bm: int, bn: int, warps: int, stages: int) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn},
        num_warps=warps,
        num_stages=stages,
        pre_hook=_set_block_shapes,
    )


# Short, focused lists for an H100/H200, per head dim: 128 query rows per program over 8 warps
# (two warpgroups of 64 rows, one wgmma row block each), or over 4 warps with half-size K/V
# blocks at D = 64 (small enough for two programs per SM); 2-4 stages of K and V in shared
# memory (at D = 128 one stage of 128-row K and V blocks is 64 KB: 3 stages and the Q tile fill
# the 227 KB an SM gives one program). Compiled for sm_90 none of them spills registers.
GPU_CONFIGS: dict[int, list[triton.Config]] = {
    64: [_config(128, 128, 8, 3), _config(128, 64, 4, 4), _config(128, 64, 8, 3)],
    128: [_config(128, 128, 8, 3), _config(128, 128, 8, 2), _config(128, 64, 8, 3)],
}
# The interpreter runs one config (it cannot time anything); small blocks keep CPU tests quick
# and still exercise diagonal blocks made of two K blocks (BLOCK_M = 2 * BLOCK_N).
INTERPRET_CONFIGS = [_config(64, 32, 4, 1)]


def _configs_for_head_dim(configs: list, named_args: dict, **kwargs: object) -> list:
    return configs if INTERPRET else GPU_CONFIGS[kwargs["HEAD_DIM"]]  # type: ignore[index]


attention_kernel1_tuned = triton.autotune(
    configs=INTERPRET_CONFIGS if INTERPRET else [c for cs in GPU_CONFIGS.values() for c in cs],
    key=["seq_q", "seq_k", "HEAD_DIM", "CAUSAL"],
    prune_configs_by={"early_config_prune": _configs_for_head_dim},
    # Short timings per config: the lab tunes about 24 cases and must stay within its budget.
    do_bench=lambda fn, quantiles: triton.testing.do_bench(
        fn, warmup=5, rep=20, quantiles=quantiles
    ),
)(attention_kernel1)
# --8<-- [end:configs1]


def launch_kernel1(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    causal: bool,
    scale: float,
) -> torch.Tensor:
    """q, out: (B, H, Sq, D); k, v: (B, H, Sk, D); all contiguous, 16-byte aligned."""
    b, h, seq_q, d = q.shape
    seq_k = k.shape[2]

    def desc(t: torch.Tensor) -> TensorDescriptor:
        # One 2-D view (B * H * S, D) per tensor; the box shape is set per config (pre_hook).
        return TensorDescriptor(t, [t.numel() // d, d], [d, 1], [16, d])

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(seq_q, meta["BLOCK_M"]) * b * h,)

    attention_kernel1_tuned[grid](
        desc(q),
        desc(k),
        desc(v),
        out,
        seq_q,
        seq_k,
        scale * LOG2E,
        HEAD_DIM=d,
        CAUSAL=bool(causal),
    )
    return out

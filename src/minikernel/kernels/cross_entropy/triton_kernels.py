"""Cross-entropy in Triton: loss and gradient of each row in one pass over its logits.

For one row of logits x (V classes) and its target t, with label smoothing e:
    lse  = log(sum_j exp(x_j))
    loss = lse - (1 - e) * x_t - (e / V) * sum_j x_j
    dloss/dx_j = softmax(x)_j - (1 - e) * [j == t] - e / V

The gradient needs only lse, which the loss computes anyway. So the kernel, while it has the
row in hand, writes the gradient too: the logits are read for the loss and the gradient costs
one more write, instead of a second kernel that reads them again (and a framework's chain of
kernels that writes log-softmax out in between).

Rows of 128K classes do not fit in registers, so lse is computed online, tile by tile:
    m_new = max(m, max(tile));  s = s * exp(m - m_new) + sum(exp(tile - m_new))
and the gradient pass walks the tiles back from the last, re-reading them from L2.
lse is kept as the pair (m, log s) and every formula subtracts m first (x - m, m - x_t): with
logits of 1e30, m + log s would round log s away entirely.

Byte model (element size b): forward only T*V*b; loss and gradient 2*T*V*b (read x, write dx).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

ELEMS_PER_THREAD = 16  # per tile: two 16-byte loads (16-bit logits) or four (fp32)
L2_ROWS_BYTES = 64 * 1024  # rows up to this size: two programs per SM; longer rows: one


# --8<-- [start:kernel1]
@triton.jit
def cross_entropy_kernel1(
    x_ptr,  # (T, V) logits; row stride stride_x, unit column stride
    stride_x,
    target_ptr,  # (T,) int32 or int64
    loss_ptr,  # (T,) fp32: the row's loss (not yet divided by anything)
    stats_ptr,  # (T, 2) fp32: m and log s of the row (read instead of computed when not LOSS)
    dx_ptr,  # (T, V) gradient, x's dtype; may be x itself (written in place)
    stride_dx,
    n_valid_ptr,  # (1,) fp32: rows whose target is not ignore_index ('mean' divides by it)
    row_scale_ptr,  # (T,) fp32: a per-row factor for the gradient (reduction='none')
    V,
    ignore_index,
    smoothing,
    LOSS: tl.constexpr,  # compute m, log s and the loss
    GRAD: tl.constexpr,  # write the gradient
    MEAN: tl.constexpr,  # scale the gradient by 1 / n_valid
    ROW_SCALE: tl.constexpr,  # scale the gradient by row_scale[row]
    SMOOTH: tl.constexpr,  # label smoothing is on: also needs sum_j (x_j - m)
    SINGLE: tl.constexpr,  # the row fits one tile (BLOCK_V >= V)
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    dx_row = dx_ptr + row * stride_dx
    target = tl.load(target_ptr + row).to(tl.int64)
    if target == ignore_index:
        # An ignored row adds nothing to the loss, and its gradient is zero.
        if LOSS:
            tl.store(loss_ptr + row, 0.0)
            tl.store(stats_ptr + 2 * row + tl.arange(0, 2), tl.zeros([2], dtype=tl.float32))
        if GRAD:
            zeros = tl.zeros([BLOCK_V], dtype=dx_ptr.dtype.element_ty)
            for start in range(0, V, BLOCK_V):
                cols = start + tl.arange(0, BLOCK_V)
                tl.store(dx_row + cols, zeros, mask=cols < V)
    else:
        # A target outside [0, V) is a caller's bug: the row gets NaN (loss and gradient)
        # rather than an out-of-bounds read.
        in_range = (target >= 0) & (target < V)
        uniform = smoothing / V  # the smoothing's share of each class (0 without smoothing)
        if GRAD:
            scale = 1.0
            if MEAN:
                scale = scale / tl.load(n_valid_ptr)
            if ROW_SCALE:
                scale = scale * tl.load(row_scale_ptr + row)
            scale = tl.where(in_range, scale, float("nan"))
        if SINGLE:
            # The row fits one tile: read it once, keep it in registers for both results.
            cols = tl.arange(0, BLOCK_V)
            mask = cols < V
            x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
            if LOSS:
                m = tl.max(x, axis=0)
                m = tl.where(m == -float("inf"), 0.0, m)  # all -inf: avoid -inf - -inf
                log_s = tl.log(tl.sum(tl.exp(x - m), axis=0))
                x_t = tl.load(x_row + target, mask=in_range, other=float("nan")).to(tl.float32)
                loss = log_s + (1.0 - smoothing) * (m - x_t)
                if SMOOTH:
                    loss -= uniform * tl.sum(tl.where(mask, x - m, 0.0), axis=0)
                tl.store(loss_ptr + row, loss)
                tl.store(stats_ptr + 2 * row, m)
                tl.store(stats_ptr + 2 * row + 1, log_s)
            else:
                m = tl.load(stats_ptr + 2 * row)
                log_s = tl.load(stats_ptr + 2 * row + 1)
            if GRAD:
                p = tl.exp((x - m) - log_s)  # softmax, from the row still in registers
                g = tl.where(cols == target, p - (1.0 - smoothing), p) - uniform
                tl.store(dx_row + cols, (g * scale).to(dx_ptr.dtype.element_ty), mask=mask)
        else:
            n_tiles = tl.cdiv(V, BLOCK_V)
            if LOSS:
                # Pass 1: online log-sum-exp. m is the running max; s the sum of exp(x - c) and
                # dev the sum of (x - c) (label smoothing) over the tiles read so far, where the
                # shift c is m, or 0 while every logit so far is -inf (a masked vocabulary:
                # -inf - -inf would be NaN). Lines are read with evict_last: pass 2 wants them
                # still in L2.
                m = -float("inf")
                c = 0.0
                s = 0.0
                dev = 0.0
                # Each tile's two block-wide reductions (max, sum) stop every warp at a
                # barrier. The next tile's load is issued before them, so it is in flight
                # meanwhile (past the last tile the mask is all false: nothing is read).
                cols_next = tl.arange(0, BLOCK_V)
                x_next = tl.load(
                    x_row + cols_next,
                    mask=cols_next < V,
                    other=-float("inf"),
                    eviction_policy="evict_last",
                )
                for i in range(0, n_tiles):
                    cols = cols_next
                    x = x_next.to(tl.float32)
                    cols_next = cols + BLOCK_V
                    x_next = tl.load(
                        x_row + cols_next,
                        mask=cols_next < V,
                        other=-float("inf"),
                        eviction_policy="evict_last",
                    )
                    m_new = tl.maximum(m, tl.max(x, axis=0))
                    c_new = tl.where(m_new == -float("inf"), 0.0, m_new)
                    # rescale s to the new shift (while s is still 0, skip it: 0 * inf = NaN)
                    s = tl.where(m == -float("inf"), 0.0, s * tl.exp(c - c_new))
                    s += tl.sum(tl.exp(x - c_new), axis=0)
                    if SMOOTH:
                        seen = i * BLOCK_V  # logits before this tile, re-measured from c_new
                        dev += seen * (c - c_new) + tl.sum(
                            tl.where(cols < V, x - c_new, 0.0), axis=0
                        )
                    m = m_new
                    c = c_new
                m = c
                log_s = tl.log(s)
                x_t = tl.load(x_row + target, mask=in_range, other=float("nan")).to(tl.float32)
                loss = log_s + (1.0 - smoothing) * (m - x_t)
                if SMOOTH:
                    loss -= uniform * dev
                tl.store(loss_ptr + row, loss)
                tl.store(stats_ptr + 2 * row, m)
                tl.store(stats_ptr + 2 * row + 1, log_s)
            else:
                m = tl.load(stats_ptr + 2 * row)
                log_s = tl.load(stats_ptr + 2 * row + 1)
            if GRAD:
                # Pass 2, last tile first: those are the lines pass 1 read most recently.
                for i in range(0, n_tiles):
                    cols = (n_tiles - 1 - i) * BLOCK_V + tl.arange(0, BLOCK_V)
                    mask = cols < V
                    x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first")
                    p = tl.exp((x.to(tl.float32) - m) - log_s)  # softmax
                    g = tl.where(cols == target, p - (1.0 - smoothing), p) - uniform
                    # the gradient is not read here again: evict_first keeps L2 for the logits
                    tl.store(
                        dx_row + cols,
                        (g * scale).to(dx_ptr.dtype.element_ty),
                        mask=mask,
                        eviction_policy="evict_first",
                    )


# --8<-- [end:kernel1]


def launch(
    x: torch.Tensor,
    target: torch.Tensor,
    loss: torch.Tensor,
    stats: torch.Tensor,
    *,
    dx: torch.Tensor | None = None,
    compute_loss: bool = True,
    n_valid: torch.Tensor | None = None,
    row_scale: torch.Tensor | None = None,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> None:
    """Run cross_entropy_kernel1 over the rows of ``x`` (T, V): the loss and the (T, 2) row
    statistics (max, log-sum-exp past it) when ``compute_loss``, else read from ``stats``; the
    gradient into ``dx`` when given (``dx`` may be ``x``), scaled by 1/``n_valid`` and/or
    ``row_scale`` when given."""
    t, v = x.shape
    grad = dx is not None
    # Sixteen logits per thread per tile keeps the kernel under 64 registers, so an SM holds
    # 1024 threads: 16 warps = two programs per SM, 32 warps = one. When the gradient pass
    # re-reads a row, every row in flight should still be in L2 by then: rows in flight =
    # programs per SM x SMs x row bytes (H200: 50 MB of L2, 132 SMs), so rows over 64 KB get
    # one program per SM.
    rereads = grad and compute_loss
    warps = 32 if rereads and v * x.element_size() > L2_ROWS_BYTES else 16
    block = min(triton.next_power_of_2(v), ELEMS_PER_THREAD * 32 * warps)
    warps = max(1, min(warps, block // (ELEMS_PER_THREAD * 32)))
    single = block >= v
    cross_entropy_kernel1[(t,)](
        x,
        x.stride(0),
        target,
        loss,
        stats,
        dx if grad else x,
        dx.stride(0) if grad else 0,
        n_valid if n_valid is not None else stats,
        row_scale if row_scale is not None else stats,
        v,
        ignore_index,
        float(label_smoothing),
        LOSS=compute_loss,
        GRAD=grad,
        MEAN=n_valid is not None,
        ROW_SCALE=row_scale is not None,
        SMOOTH=label_smoothing > 0.0,
        SINGLE=single,
        BLOCK_V=block,
        num_warps=warps,
    )


# --8<-- [start:scale]
@triton.jit
def scale_unless_one_kernel(
    g_ptr,  # (1,) the upstream gradient of the reduced loss, any float dtype
    x_ptr,  # (rows, cols) with unit column stride: the gradient computed in the forward pass
    stride_row,
    rows,
    cols,
    BLOCK: tl.constexpr,
):
    # loss.backward() passes g = 1, and then the gradient written in the forward pass is already
    # the answer. Asking the host whether g == 1 would wait for the GPU to finish everything
    # queued before (a synchronisation) and leave it idle while Python launches the next kernel;
    # asking here costs one 4-byte load per program, and a program that finds 1 stops.
    g = tl.load(g_ptr).to(tl.float32)
    if g != 1.0:  # NaN != 1 too: a NaN upstream gradient gives a NaN gradient, as in PyTorch
        tiles_per_row = tl.cdiv(cols, BLOCK)
        n_tiles = rows * tiles_per_row
        for tile in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
            row = (tile // tiles_per_row).to(tl.int64)
            c = (tile % tiles_per_row) * BLOCK + tl.arange(0, BLOCK)
            ptr = x_ptr + row * stride_row + c
            x = tl.load(ptr, mask=c < cols)
            tl.store(ptr, (x.to(tl.float32) * g).to(x.dtype), mask=c < cols)


# --8<-- [end:scale]


def scale_unless_one(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``x *= g`` in place unless the 1-element tensor ``g`` holds 1, decided on the device
    (no host synchronisation). ``x`` is 2-D with unit column stride, or contiguous."""
    x2 = x if x.dim() == 2 else x.view(1, -1)  # contiguous by the contract: one long row
    if x2.numel() == 0:
        return x
    if x2.stride(1) != 1:
        raise ValueError(f"scale_unless_one: x needs unit column stride, got strides {x.stride()}")
    if g.numel() != 1:
        raise ValueError(f"scale_unless_one: g must hold one value, got shape {tuple(g.shape)}")
    rows, cols = x2.shape
    block = min(4096, triton.next_power_of_2(cols))
    n_tiles = rows * triton.cdiv(cols, block)
    # A few programs per SM walk the tiles when g != 1; when g == 1 each of them reads g and
    # stops, so the launch costs a few microseconds. The interpreter runs programs one by one.
    if x2.is_cuda:
        sms = torch.cuda.get_device_properties(x2.device).multi_processor_count
        programs = min(n_tiles, 4 * sms)
    else:
        programs = min(n_tiles, 4)
    scale_unless_one_kernel[(programs,)](
        g.reshape(1), x2, x2.stride(0), rows, cols, BLOCK=block, num_warps=8
    )
    return x

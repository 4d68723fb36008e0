"""Softmax in Triton: a fused single-tile kernel and an online multi-tile kernel.

Byte model for both: 2 * M * N * element size (read x once, write y once). Kernel 2, and
kernel 1 where its autotuner picks RELOAD, read x a second time, from L1/L2 (see the comments).

- ``softmax_kernel1``: the row lives in registers as one tile of BLOCK_N = next_pow2(N) columns;
  ROWS rows per program when rows are short, so that a program still moves a few thousand
  elements. Rows up to ``TILE_MAX`` columns.
- ``softmax_kernel2``: rows of any length, TILE columns at a time, with the online recurrence
  of Milakov & Gimelshein (2018) for (max, sum); a second pass writes the output.

Both are autotuned over ``num_warps`` on a GPU, kernel 1 also over reading the row once or
twice (RELOAD) and kernel 2 over its tile. Under the Triton interpreter (``TRITON_INTERPRET=1``,
CPU tensors) each has exactly one configuration, because autotuning needs a GPU to time on.
"""

from __future__ import annotations

import json
import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

TILE_MAX = 32768
"""Longest row softmax_kernel1 holds in registers: 32 fp32 values per thread at 32 warps. Past
that, registers spill to local memory; softmax_kernel2 takes longer rows."""


def _tuning_bench(fn, quantiles):  # type: ignore[no-untyped-def]
    """Autotuning only has to rank a few configs: 25 ms per config instead of do_bench's 125."""
    return triton.testing.do_bench(fn, warmup=5, rep=20, quantiles=quantiles)


def vector_divisor(n: int) -> int:
    """Largest power of two (at most 16) dividing n. The kernels rewrite n as (n // DIV) * DIV,
    which is the same number but tells Triton's alignment analysis that rows start, and masks
    change, only on DIV-element boundaries: a row of 600 fp32 values (600 = 8 * 75) is then still
    read with 16-byte vectors. On its own, Triton only knows that when n % 16 == 0."""
    d = 1
    while d < 16 and n % (2 * d) == 0:
        d *= 2
    return d


# --8<-- [start:kernel1]
def _fused_configs() -> list[triton.Config]:
    if INTERPRET:
        return [triton.Config({"RELOAD": False}, num_warps=4)]
    return [
        triton.Config({"RELOAD": reload}, num_warps=w)
        for w in (1, 2, 4, 8, 16, 32)
        for reload in (False, True)
    ]


def _prune_fused(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list:
    """Keep the warp counts that give each thread 16 or 32 elements of the tile (two to eight
    16-byte loads in flight): fewer and an SM has too few bytes in flight to cover DRAM's
    latency; more and the tile no longer fits in registers. Two warp counts, each with and
    without RELOAD: four configs, four compiles."""
    elems = named_args["BLOCK_N"] * named_args["ROWS"]
    keep = [c for c in configs if 16 <= elems // (32 * c.num_warps) <= 32]
    return keep or [min(configs, key=lambda c: abs(elems // (32 * c.num_warps) - 16))]


@triton.jit
def softmax_kernel1(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    rows_class,  # next_pow2(n_rows): unused here, it keys the autotuner's choice (see below)
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
    DIV: tl.constexpr,
    RELOAD: tl.constexpr,
):
    n_cols = (n_cols // DIV) * DIV  # same value; now known to be a multiple of DIV (vectors)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offsets = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]  # int64: M * N may pass 2^31
    # Masked lanes read -inf: exp(-inf - max) = 0 adds nothing to the sum.
    if RELOAD:
        # Read the row, reduce it (max, then sum), and read it again for the output: the second
        # read finds the lines in L1/L2 (evict_last keeps them there), so DRAM sees x once, and
        # no tile of exponentials stays live in registers across the sum. The autotuner keeps
        # whichever form is faster for each row length and dtype.
        x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        m = tl.max(x, axis=1)
        s = tl.sum(tl.exp(x - m[:, None]), axis=1)
        x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"), eviction_policy="evict_first")
        y = tl.exp(x.to(tl.float32) - m[:, None]) * (1.0 / s)[:, None]
    else:
        # No eviction hint here: x is read once and y written once, which reads like a case for
        # evict_first, but on the H200 the hint made this form slower at every row length and
        # warp count we tried, with the same DRAM bytes in ncu (see the fused-softmax page).
        x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])  # a row of -inf gives -inf - -inf = NaN, as torch does
        s = tl.sum(e, axis=1)
        y = e * (1.0 / s)[:, None]
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


softmax_kernel1_tuned = triton.autotune(
    configs=_fused_configs(),
    # The number of rows, as a power of two, is in the key: without it the choice made the
    # first time a tile width is met (in the lab, on a 512-row check of a few microseconds) was
    # reused for 32768 rows, and at 600 and 781 bf16 columns it was a poor one. Triton adds the
    # pointers' dtypes to the key.
    key=["BLOCK_N", "ROWS", "rows_class"],
    prune_configs_by={"early_config_prune": _prune_fused},
    do_bench=_tuning_bench,
)(softmax_kernel1)
"""softmax_kernel1 as launched: autotuned over warps and RELOAD (one config in the interpreter).
Tests call the plain kernel to run both forms anywhere."""


# The interpreter runs programs one after another at about a millisecond each, whatever their
# size, so on the CPU fewer, larger programs are cheaper (and still pack several rows).
_PROGRAM_ELEMS, _MIN_PROGRAMS = (16384, 4) if INTERPRET else (1024, 512)


def rows_per_program(n_rows: int, block_n: int) -> int:
    """Short rows are packed ROWS to a program so that one program still moves ~1024 elements,
    but never so many that fewer than ~512 programs remain to spread over the SMs. A row of
    1024 (or 512, 600, 781) columns is then one program of one or two warps, whose max and sum
    are warp shuffles with no barrier: on the H200 that beat four rows over four or eight warps
    at 32768 x 600 bf16 by a fifth, and matched it at 256 columns (four rows, one or two warps)."""
    want = max(1, _PROGRAM_ELEMS // block_n)
    room = max(1, triton.next_power_of_2(triton.cdiv(n_rows, _MIN_PROGRAMS)))
    return min(want, room)


def launch_kernel1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x, y: contiguous (M, N) with N <= TILE_MAX."""
    n_rows, n_cols = x.shape
    block_n = triton.next_power_of_2(n_cols)
    rows = rows_per_program(n_rows, block_n)
    grid = (triton.cdiv(n_rows, rows),)
    args = (
        x,
        y,
        n_rows,
        n_cols,
        triton.next_power_of_2(n_rows),
        block_n,
        rows,
        vector_divisor(n_cols),
    )
    if pinned := os.environ.get(PIN_ENV):
        config = _pinned_config(pinned)
        softmax_kernel1[grid](*args, RELOAD=config["RELOAD"], num_warps=config["num_warps"])
        return y
    # rows_class, BLOCK_N, ROWS and DIV go by position so that the autotuner's pruning function
    # and its key see them.
    softmax_kernel1_tuned[grid](*args)
    return y


# --8<-- [end:kernel1]

PIN_ENV = "MINIKERNEL_SOFTMAX_KERNEL1_CONFIG"
"""A JSON config, {"num_warps": 4, "RELOAD": true}: launch_kernel1 runs it instead of
autotuning. The lab sets it for the process ncu profiles, so that the excerpt is of the launch it
timed: tuning again in that process, on 25 ms per candidate, can pick another of two configs
that time within a few per cent of each other."""


def _pinned_config(text: str) -> dict[str, int | bool]:
    try:
        config = json.loads(text)
        warps, reload = config["num_warps"], config["RELOAD"]
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(
            f"{PIN_ENV} must be a JSON object with num_warps and RELOAD, got {text!r}"
        ) from exc
    if warps not in (1, 2, 4, 8, 16, 32) or not isinstance(reload, bool):
        raise ValueError(
            f"{PIN_ENV}: num_warps must be a power of two from 1 to 32 and RELOAD true or "
            f"false, got {text!r}"
        )
    return {"num_warps": warps, "RELOAD": reload}


def last_kernel1_config() -> dict[str, int | bool] | None:
    """The config softmax_kernel1's autotuner ran its last launch with (warps, RELOAD), or None
    before the first launch. The lab records it next to each triton:1 time."""
    config = getattr(softmax_kernel1_tuned, "best_config", None)
    return None if config is None else {"num_warps": config.num_warps, **config.kwargs}


# --8<-- [start:kernel2]
def _online_configs() -> list[triton.Config]:
    if INTERPRET:
        return [triton.Config({"TILE": 4096}, num_warps=4)]
    return [  # 16 elements per thread each; wider tiles mean fewer tile-wide max reductions
        triton.Config({"TILE": 4096}, num_warps=8),
        triton.Config({"TILE": 8192}, num_warps=16),
        triton.Config({"TILE": 16384}, num_warps=32),
    ]


def _prune_online(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list:
    """A tile much wider than the row is wasted lanes: keep tiles up to next_pow2(N)."""
    width = triton.next_power_of_2(named_args["n_cols"])
    keep = [c for c in configs if c.kwargs["TILE"] <= max(width, 4096)]
    return keep or configs[:1]


@triton.autotune(
    configs=_online_configs(),
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _prune_online},
    do_bench=_tuning_bench,
)
@triton.jit
def softmax_kernel2(x_ptr, y_ptr, n_cols, DIV: tl.constexpr, TILE: tl.constexpr):
    n_cols = (n_cols // DIV) * DIV
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, TILE)
    n_tiles = tl.cdiv(n_cols, TILE)

    # Pass 1, forward: a running max m (one number) and per-lane sums s rescaled to it. One
    # tile-wide max per tile and one exp per element; the lanes are summed once, at the end.
    m = tl.max(tl.full([TILE], -float("inf"), tl.float32), axis=0)
    s = tl.zeros([TILE], dtype=tl.float32)
    for t in range(0, n_tiles):
        offs = t * TILE + cols
        x = tl.load(
            x_row + offs, mask=offs < n_cols, other=-float("inf"), eviction_policy="evict_last"
        )
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While everything seen is -inf, shift by 0 instead: -inf - -inf would be NaN.
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    inv = 1.0 / tl.sum(s, axis=0)

    # Pass 2, backward: the tiles pass 1 read last are the likeliest to still be in L2.
    for i in range(0, n_tiles):
        offs = (n_tiles - 1 - i) * TILE + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"), eviction_policy="evict_first")
        y = tl.exp(x.to(tl.float32) - m) * inv
        tl.store(
            y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first"
        )


def launch_kernel2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x, y: contiguous (M, N), any N >= 1."""
    n_rows, n_cols = x.shape
    softmax_kernel2[(n_rows,)](x, y, n_cols, vector_divisor(n_cols))
    return y


# --8<-- [end:kernel2]

"""Sweep the whole-row launches of RMSNorm's Triton forward (rmsnorm_kernel2) on your GPU.

    python labs/sweep_rmsnorm_forward.py            # the lab's shapes, bf16 and fp32
    python labs/sweep_rmsnorm_forward.py --top 5

For each row length from 1024 to 16384 it times every (rows per program, warps) whose threads
hold 1 to 16 vectors of 16 bytes, with x kept in registers or loaded again after the sum
(RELOAD), and prints the fastest against the copy ceiling's time for the same bytes. The table
``_FWD_WHOLE_ROW`` in src/minikernel/kernels/rmsnorm/triton_kernels.py holds what this sweep
picked on an H200; on another GPU, run it and compare. ``--rows 1 2`` times two long rows per
program too: at 32768 bf16 on the H200, two rows over 32 warps (the bytes per program of a
65536-element row) were no faster than one row over 16 warps. It prints, it writes nothing: the
course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import argparse
import functools

import torch
import triton

from minikernel.bench.ceilings import copy_GBps
from minikernel.bench.timing import time_gpu
from minikernel.kernels.rmsnorm import make_inputs
from minikernel.kernels.rmsnorm import triton_kernels as tk

SHAPES = [(torch.bfloat16, 32768), (torch.float32, 16384)]  # (dtype, rows), as in 02_rmsnorm
LENGTHS = (1024, 2048, 4096, 8192, 16384)


def launch(x, w, y, rstd, rows: int, warps: int, reload: bool):  # type: ignore[no-untyped-def]
    m, n = x.shape
    return tk.rmsnorm_kernel2[(triton.cdiv(m, rows),)](
        x,
        w,
        y,
        rstd,
        m,
        n,
        1e-6,
        HAS_W=True,
        ROWS=rows,
        BLOCK_N=triton.next_power_of_2(n),
        TILED=False,
        RELOAD=reload,
        num_warps=warps,
    )


def sweep(
    dtype: torch.dtype, m: int, n: int, gbps: float, top: int, rows_list: list[int] | None = None
) -> None:
    x, w = make_inputs(m, n, dtype, "cuda", 1)[:2]
    y, rstd = torch.empty_like(x), torch.empty(m, device="cuda", dtype=torch.float32)
    ideal_us = 2 * m * n * x.element_size() / (gbps * 1e3)
    cfg = tk.fwd_config(n, x.element_size())
    timed = []
    for rows in rows_list or ((1, 2, 4) if n <= 2048 else (1,)):
        for warps in (1, 2, 4, 8, 16, 32):
            vectors = rows * n * x.element_size() // (32 * warps * 16)
            if not 1 <= vectors <= 16:
                continue
            for reload in (False, True):
                run = functools.partial(launch, x, w, y, rstd, rows, warps, reload)
                us = time_gpu(run, graph=False).median_us
                mine = not cfg.tiled and (cfg.rows, cfg.num_warps, cfg.reload) == (
                    rows,
                    warps,
                    reload,
                )
                timed.append((us, rows, warps, reload, mine))
    print(f"\n{m} x {n} {str(dtype).removeprefix('torch.')}: copy ceiling {ideal_us:.1f} us")
    for us, rows, warps, reload, mine in sorted(timed)[:top]:
        how = "reload" if reload else "keep  "
        tag = "  <- fwd_config" if mine else ""
        print(f"  rows {rows}  warps {warps:2d}  {how}  {us:8.2f} us  {ideal_us / us:.3f}{tag}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=8, help="fastest launches shown per shape")
    parser.add_argument(
        "--n",
        type=int,
        nargs="*",
        help="row lengths (default: the lab's up to 16384; longer ones time whole rows too, "
        "where fwd_config walks them in tiles)",
    )
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), help="only this dtype")
    parser.add_argument(
        "--rows",
        type=int,
        nargs="*",
        help="rows per program to time (default: 1, 2 and 4 up to 2048 elements, 1 past it); "
        "two rows of a long row put twice the bytes behind each program",
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("sweep_rmsnorm_forward: needs a CUDA GPU")
    gbps = copy_GBps()
    print(f"copy ceiling {gbps:.0f} GB/s")
    for dtype, m in SHAPES:
        if args.dtype and dtype != getattr(torch, args.dtype):
            continue
        for n in args.n or LENGTHS:
            sweep(dtype, m, n, gbps, args.top, args.rows)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

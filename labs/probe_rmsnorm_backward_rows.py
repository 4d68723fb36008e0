"""Which launch of the warp-per-row RMSNorm backward is fastest: a row at a time, or a ring.

    python labs/probe_rmsnorm_backward_rows.py            # the lab's short rows, 3 rounds
    python labs/probe_rmsnorm_backward_rows.py --rounds 5 --n 1024 --dtype bfloat16

`cuda:3`'s backward for short rows (plan_bwd_rows: 520 to 2048 16-bit elements, 260 to 1024
fp32) gives each row to one warp. rmsnorm_bwd_rows_kernel_* reads a row, then writes it, with
as many warps as the SM's registers hold; rmsnorm_bwd_ring_* (rmsnorm.cu) keeps a ring of S
rows per warp in shared memory, S - 1 of them on their way while the warp works on the oldest.
rmsnorm.cu instantiates only the rings ROWS_BWD_RING ships; this probe compiles a copy with
every (warps, stages) of CANDIDATES added, checks each against the row-at-a-time kernel (dx to
the bit, dw to its rounding), and times them with it, Triton's backward and QuACK's (where it
is installed) in interleaved rounds. The fused-rmsnorm page (section 4) says what an H200
showed. It prints, it writes nothing: the course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import torch

import minikernel.kernels.rmsnorm as rn
import minikernel.kernels.rmsnorm.triton_kernels as tk
from minikernel.bench.probe import add_peer, gpu_ceiling, kernel_source, probe_parser, race, report

# K (16-byte vectors per lane and tensor) -> (warps per block, stages per warp). A stage is
# 2 KB x K; every candidate stays under the H200's 227 KB of shared memory per block.
CANDIDATES = {
    4: [(16, 3), (12, 4), (8, 6), (20, 2), (24, 2)],
    8: [(8, 3), (6, 4), (4, 6), (12, 2), (10, 2)],
}
SHAPES = [(32768, 1024, "bfloat16"), (32768, 2048, "bfloat16"), (16384, 1024, "float32")]
END = "// --8<-- [end:backward_ring]"


def with_candidates(src: str) -> str:
    """rmsnorm.cu with an instantiation for every candidate it does not already have."""
    if src.count(END) != 1:
        raise SystemExit(f"probe_rmsnorm_backward_rows: rmsnorm.cu changed; update:\n{END}")
    extra = []
    for k, launches in CANDIDATES.items():
        for warps, stages in launches:
            line = f"RMSNORM_BWD_RING({k}, {warps}, {stages})"
            if line not in src:
                extra.append(line)
    return src.replace(END, "\n".join([*extra, END]))


def probe(m: int, n: int, dtype_name: str, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x, w, dy = rn.make_inputs(m, n, dtype, "cuda", 1, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + rn.EPS)
    rows = rn.plan_bwd_rows(n, dtype)  # without cc: the row-at-a-time kernel
    ref_dx, ref_dw = rn._backward_rows(dy, x, w, rstd, rows, torch.empty_like(x), True)
    dx = torch.empty_like(x)
    cands = {
        "triton:2": lambda: tk.launch_backward(dy, x, w, rstd, dx),
        f"a row at a time (t{rows.threads})": lambda: rn._backward_rows(
            dy, x, w, rstd, rows, dx, True
        ),
    }
    shipped = rn.plan_bwd_rows(n, dtype, (9, 0))
    for warps, stages in CANDIDATES[rows.k]:
        plan = rn.RowsBwdPlan(rows.k, 32 * warps, rows.nvec, rows.elem_size, stages)
        name = f"ring w{warps} s{stages}" + (" (shipped)" if plan == shipped else "")
        got_dx, got_dw = rn._backward_rows(dy, x, w, rstd, plan, torch.empty_like(x), True)
        derr = float((got_dw.float() - ref_dw.float()).abs().max() / ref_dw.float().abs().max())
        same = torch.equal(got_dx, ref_dx)  # the same arithmetic per row: the same bits
        ok = same and derr < (1e-5 if dtype == torch.float32 else 1e-2)
        print(
            f"  {n} {dtype_name} {name}: dx {'same bits' if same else 'DIFFERS'},"
            f" dw rel {derr:.3g} {'ok' if ok else 'WRONG'}"
        )
        if ok:
            cands[name] = lambda p=plan: rn._backward_rows(dy, x, w, rstd, p, dx, True)
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "bwd", seed=1))
    ideal = rn.bwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds))


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in SHAPES), rounds=3)
    parser.add_argument("--dtype", nargs="*", choices=sorted({d for *_, d in SHAPES}))
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_backward_rows")
    text = with_candidates(rn.CU_FILE.read_text())
    with kernel_source(rn, text, "rmsnorm_ring_candidates.cu"):
        for m, n, dtype_name in SHAPES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(m, n, dtype_name, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

"""Which launch of the fixed-length RMSNorm backward is fastest: threads, weights, cluster.

    python labs/probe_rmsnorm_backward_tile.py            # the lab's M, 3 interleaved rounds
    python labs/probe_rmsnorm_backward_tile.py --rounds 5 --n 16384 131072 --dtype bfloat16

rmsnorm_bwd_tile_* (rmsnorm.cu; `cuda:3`'s backward for fp32 rows of 4096 to 131072 elements
and 16-bit rows of 32768 to 131072, plan_bwd_tile) are templates over the block size, the
vectors per thread, where the weights live (registers, or shared memory) and, past one block,
the blocks of the cluster that shares a row. rmsnorm.cu instantiates only the launches
TILE_BWD ships; this probe compiles a copy with every launch of CANDIDATES added, checks each
against Triton's dx and dw, and times them with Triton's backward, the cluster kernel's (past
16384 elements) and QuACK's (where it is installed) in interleaved rounds. The fused-rmsnorm
page (section 4) says what an H200 showed. It prints, it writes nothing: the course's numbers
come from ``nox -s labs``.
"""

from __future__ import annotations

import dataclasses

import torch

import minikernel.kernels.rmsnorm as rn
import minikernel.kernels.rmsnorm.triton_kernels as tk
from minikernel.bench.probe import add_peer, gpu_ceiling, kernel_source, probe_parser, race, report

CANDIDATES = {  # (n, x's dtype) -> (threads, vectors per thread, weights in registers[, cluster])
    # The last launches of these two: the same rows over a cluster of two, which writes one dw
    # partial row per cluster, not per block. On the H200 it beat three 256-thread blocks per
    # SM at 4096 (fewer partial rows for reduce_dw), by less than the two per SM TILE_BWD now
    # ships did in labs/probe_rmsnorm_backward_dw.py (not yet timed side by side: this probe
    # does that now), and lost at 8192, where one block fits per SM.
    (4096, "float32"): [(256, 4, True), (256, 4, False), (128, 8, True), (128, 4, True, 2)],
    (8192, "float32"): [(512, 4, True), (512, 4, False), (256, 8, True), (256, 4, True, 2)],
    # 512 x 8 needs all 128 registers a thread of 512 may have: the weights in shared memory.
    # Against it, the cluster kernel with two blocks (two rows in flight).
    (16384, "float32"): [(512, 8, False), (256, 8, True, 2)],
    # Past one block: clusters of blocks of 8192 elements (256 x 8) or 4096 (256 x 4).
    (32768, "float32"): [(256, 8, True, 4), (256, 4, True, 8)],
    (65536, "float32"): [(256, 8, True, 8), (256, 4, True, 16)],
    (131072, "float32"): [(256, 8, True, 16)],
    # 16-bit: blocks of 8192 elements (256 x 4 vectors of 8), the registers of the fp32 blocks
    # (twice that would not fit: 256 x 8 vectors of 8 is 64 fp32 values per row and thread).
    (32768, "bfloat16"): [(256, 4, True, 4)],
    (65536, "bfloat16"): [(256, 4, True, 8)],
    (131072, "bfloat16"): [(256, 4, True, 16)],
}
ROWS = {"float32": 16384, "bfloat16": 32768}  # the lab's M per dtype
SUFFIX = {"float32": "f32_wf32", "bfloat16": "bf16"}
END = "// --8<-- [end:backward_tile]"
END_C = "#endif  // __CUDA_ARCH__ >= 900\n// --8<-- [end:backward_tile_cluster]"


def with_candidates(src: str) -> str:
    """rmsnorm.cu with an instantiation for every candidate it does not already have."""
    for end in (END, END_C):
        if src.count(end) != 1:
            raise SystemExit(f"probe_rmsnorm_backward_tile: rmsnorm.cu changed; update:\n{end}")
    extra, extra_c = [], []
    for (_, dtype), launches in CANDIDATES.items():
        for t, v, wreg, *cluster in launches:
            if cluster:
                macro = "RMSNORM_BWD_TILE_C" if dtype == "float32" else "RMSNORM_BWD_TILE_C16"
                line, into = f"{macro}({t}, {v}, {cluster[0]})", extra_c
            else:
                line, into = f"RMSNORM_BWD_TILE({t}, {v}, {int(wreg)})", extra
            if line not in src and line not in into:
                into.append(line)
    src = src.replace(END, "\n".join([*extra, END]))
    return src.replace(END_C, "\n".join([*extra_c, END_C]))


def probe(n: int, dtype_name: str, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    m = ROWS[dtype_name]
    x, w, dy = rn.make_inputs(m, n, dtype, "cuda", 1, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + rn.EPS)
    ref_dx = torch.empty_like(x)
    ref_dw = tk.launch_backward(dy, x, w, rstd, ref_dx)
    dx = torch.empty_like(x)
    cands = {"triton:2": lambda: tk.launch_backward(dy, x, w, rstd, dx)}
    if n > 16384:  # the cluster kernel (plan_bwd), which a knob makes _backward_cuda run
        cands["cluster kernel"] = lambda: rn._backward_cuda(dy, x, w, rstd, dx=dx, threads=512)
    shipped = rn.plan_bwd_tile(n, dtype, w.dtype, torch.cuda.get_device_capability())
    # dx against Triton's, relative to its largest value: fp32 rounding, or in 16-bit one
    # rounding of each stored value (2^-8 relative in bf16) plus the sums' different order
    tol = (1e-4 if dtype == torch.float32 else 2**-6) * float(ref_dx.float().abs().max())
    for launch in CANDIDATES[(n, dtype_name)]:
        plan = rn.TileBwdPlan(*launch, suffix=SUFFIX[dtype_name])
        name = plan.kernel.removeprefix("rmsnorm_bwd_tile_").removesuffix("_" + plan.suffix)
        if shipped is not None and dataclasses.replace(shipped, per_sm=0) == plan:
            plan = shipped  # on the shipped grid (TILE_BWD may cap the blocks per SM)
            name += f"{f' {plan.per_sm}/SM' if plan.per_sm else ''} (shipped)"
        got_dx, got_dw = rn._backward_tile(dy, x, w, rstd, plan, torch.empty_like(x), True)
        err = float((got_dx.float() - ref_dx.float()).abs().max())
        derr = float((got_dw.float() - ref_dw.float()).abs().max() / ref_dw.float().abs().max())
        verdict = (
            "ok" if err < tol and derr < (1e-5 if dtype == torch.float32 else 1e-2) else "WRONG"
        )
        print(f"  {n} {dtype_name} {name}: dx {err:.3g}, dw rel {derr:.3g} {verdict}")
        if verdict == "ok":
            cands[name] = lambda p=plan: rn._backward_tile(dy, x, w, rstd, p, dx, True)
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "bwd", seed=1))
    ideal = rn.bwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=24)


def main() -> None:
    parser = probe_parser(__doc__, (n for n, _ in CANDIDATES), rounds=3)
    parser.add_argument("--dtype", nargs="*", choices=sorted(ROWS), help="x's dtypes")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_backward_tile")
    text = with_candidates(rn.CU_FILE.read_text())
    with kernel_source(rn, text, "rmsnorm_tile_candidates.cu"):
        for n, dtype_name in CANDIDATES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(n, dtype_name, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

"""What the weight gradient's second kernel costs RMSNorm's CUDA backward on mid-length rows.

    python labs/probe_rmsnorm_backward_dw.py             # the three fp32 rows below, 5 rounds
    python labs/probe_rmsnorm_backward_dw.py --rounds 3

At fp32 rows of 4096 to 16384 elements `cuda:3`'s backward is the fixed-length CUDA kernel
(plan_bwd_tile): one block per SM slot walks its rows and keeps its share of dw in registers,
writes it as one row of a (blocks, N) fp32 partial, and a second, small kernel (reduce_dw)
adds the rows up in a fixed order. The warp-per-row kernel of shorter rows folds that sum into
itself after a grid-wide barrier; this one does not. At 16384 x 4096 fp32 the lab has QuACK's
backward a little ahead of ours. This probe times, in interleaved rounds:

    dx and dw         cuda:3's backward as the lab times it: the kernel, then reduce_dw
    dx only           the same kernel with need_dw=False: no partial written, no second kernel
    dx and dw, k/SM   the kernel on a grid of k blocks per SM, for every k up to what the GPU
                      holds at once but the one TILE_BWD ships: fewer blocks write fewer
                      partial rows to add up, against fewer rows in flight
    triton:2          Triton's backward (dx and dw), for scale

The difference between the first two is what the partial rows and the second kernel cost. On
the H200, at 4096 elements, two blocks per SM out of the three that fit beat both, and TILE_BWD
ships that grid (the fused-rmsnorm page, section 4). A fold of the partial rows into the
kernel's own launch, which the warp-per-row kernels do, was slower on the H200 (tried on a side
branch, not merged). It prints, it writes nothing: the course's numbers come from
``nox -s labs``.
"""

from __future__ import annotations

import ctypes

import torch

import minikernel.kernels.rmsnorm as rn
from minikernel.bench.probe import gpu_ceiling, probe_parser, race, report

SHAPES = [  # (rows, row length, dtype): where cuda:3's backward runs the fixed-length kernel
    (16384, 4096, "float32"),  # the lab's one backward row where QuACK is ahead
    (16384, 8192, "float32"),
    (16384, 16384, "float32"),
]
EPS = 1e-6


def probe(m: int, n: int, dtype_name: str, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x, w, dy = rn.make_inputs(m, n, dtype, "cuda", 0, with_grad_out=True)
    rstd = torch.empty(m, dtype=torch.float32, device="cuda")
    rn.VARIANTS["cuda:3"].fn(x, w, torch.empty_like(x), EPS, rstd)
    plan = rn.backward_cuda_plan(n, dtype, w.dtype, torch.cuda.get_device_capability())
    print(f"  {m} x {n} {dtype_name}: cuda:3's backward plan {plan}")

    def bwd(impl: str, need_dw: bool = True):  # type: ignore[no-untyped-def]
        return lambda: rn._backward(dy, x, w, rstd, need_dw=need_dw, impl=impl)

    cands = {
        "dx and dw": bwd("cuda:3"),
        "dx only": bwd("cuda:3", False),
        "triton:2": bwd("triton:2"),
    }
    if isinstance(plan, rn.TileBwdPlan) and plan.cluster == 1:
        want_dx, want = rn._backward(dy, x, w, rstd, impl="cuda:3")
        dx = torch.empty_like(x)
        for name, run in other_grids(plan, dy, x, w, rstd, dx).items():
            dx.fill_(float("nan"))
            got = run()  # dx lands in dx, dw comes back
            scale = float(want.abs().max())
            ok = torch.equal(dx, want_dx)  # the same arithmetic per row: the same bits
            ok = ok and torch.allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
            print(f"  {m} x {n} {dtype_name} {name}: dx and dw {'agree' if ok else 'DIFFER'}")
            if ok:
                cands[name] = run
    ideal = rn.bwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=18)


def other_grids(plan, dy, x, w, rstd, dx):  # type: ignore[no-untyped-def]
    """The fixed-length kernel launched as _backward_tile launches it (dx into ``dx``), but on
    grids of k blocks per SM for every k up to what the GPU holds at once, but the grid the plan
    ships: one dw partial row per block."""
    from minikernel.cuda import get_kernel

    kernel = get_kernel(rn.CU_FILE, plan.kernel)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    most = kernel.max_active_clusters(plan.threads, plan.smem, 1) // sms
    shipped = plan.per_sm or most
    out = {}
    for k in range(1, most + 1):
        if k == shipped:
            continue
        out[f"dx and dw, {k}/SM"] = lambda k=k: rn._launch_bwd(
            kernel,
            dy,
            x,
            w,
            rstd,
            dx,
            (ctypes.c_int64(x.shape[0]),),
            groups=k * sms,
            threads=plan.threads,
            smem=plan.smem,
        )
    print(f"  {x.shape[0]} x {x.shape[1]}: {most} blocks per SM at once, {shipped} shipped")
    return out


def main() -> None:
    args = probe_parser(__doc__).parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_backward_dw")
    for m, n, dtype_name in SHAPES:
        probe(m, n, dtype_name, args.rounds, gbps)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

"""Does rung 3 speed up with rung 6's copy, cp.async.ca instead of .cg?

    python labs/probe_rmsnorm_forward_ca.py              # the lab's rows from 4096, 5 rounds
    python labs/probe_rmsnorm_forward_ca.py --rounds 3 --n 65536 131072

Rung 6 (rmsnorm.cu) is QuACK's order of steps, and labs/probe_rmsnorm_forward_staged.py found
that the order alone was far behind QuACK until its copies into shared memory became
cp.async.ca, which allocates the lines in L1 on the way, as CUTLASS's cp.async does by default.
Rung 3 stages its slices with cluster.cuh's stage_vectors, whose copies are cp.async.cg (L2
only). This probe compiles a copy of rmsnorm.cu in which rung 3 stages with a .ca copy instead
(nothing else changes: the same slices, sums, exchange and stores, so the same bits; checked on
the whole output into a NaN-filled y) and times it beside the shipped rung 3, rungs 5 and 6 and
QuACK in interleaved rounds, all timed like the lab, at every row of the lab's sweep from 4096
values, where rung 3 holds the row in one block (up to 64 KB) or over a cluster.

Byte model and prediction: the same bytes as every forward (x read, y written, the weights from
L2), so any change is in how the copies reach DRAM. If .ca helped rung 6's order by what it
does to the copy, rung 3 should gain too, most at the cluster rows where it trails rungs 4 and
5; if it helped only together with the weights held in registers, rung 3 stays where it is.
Run on an H200 on 2026-12-02; the fused-RMSNorm page says what it found. It prints, it writes
nothing: the course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import minikernel.kernels.rmsnorm as rn
from minikernel.bench.probe import (
    add_peer,
    admit,
    gpu_ceiling,
    probe_parser,
    race,
    report,
    write_variants,
)

SHAPES = [(32768, n, "bfloat16") for n in (4096, 8192, 16384, 32768, 65536, 131072)] + [
    (16384, n, "float32") for n in (4096, 8192, 16384, 32768, 65536, 131072)
]
CALL = "    stage_vectors<T, THREADS>(xr + first, slice, s.count, [&](const Vec<T>& v) {\n"
ANCHOR = "// --8<-- [start:kernel3]\n"
STAGE_CA = r"""
// probe: cluster.cuh's stage_vectors with cp.async.ca (the copy allocates in L1) instead of .cg
template <typename T, int THREADS, typename Fold>
__device__ __forceinline__ void stage_vectors_ca(const T* src, Vec<T>* dst, int count,
                                                 Fold&& fold) {
    constexpr int VN = Vec<T>::N;
    const int tid = threadIdx.x;
#pragma unroll 4
    for (int i = tid; i < count; i += THREADS) {
        const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst + i));
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(s),
                     "l"(src + static_cast<long long>(i) * VN)
                     : "memory");
    }
    cp_async_wait_all();
    for (int i = tid; i < count; i += THREADS) fold(dst[i]);
}
"""


def with_ca(src: str) -> str:
    """rmsnorm.cu whose rung 3 stages its slice with stage_vectors_ca."""
    for text in (CALL, ANCHOR):
        if src.count(text) != 1:
            raise SystemExit(f"probe_rmsnorm_forward_ca: rmsnorm.cu changed; update:\n{text}")
    src = src.replace(CALL, CALL.replace("stage_vectors<", "stage_vectors_ca<"))
    return src.replace(ANCHOR, STAGE_CA + ANCHOR)


def from_copy(path: Path, fn):  # type: ignore[no-untyped-def]
    """``fn`` run with the module's kernels loaded from ``path`` (an edited copy of rmsnorm.cu:
    the same kernel names, another file, so another cache entry)."""

    def run():  # type: ignore[no-untyped-def]
        real = rn.CU_FILE
        rn.CU_FILE = path
        try:
            return fn()
        finally:
            rn.CU_FILE = real

    return run


def probe(m: int, n: int, dtype_name: str, path: Path, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x, w = rn.make_inputs(m, n, dtype, "cuda", 1)[:2]
    rstd = torch.empty(m, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)

    def rung(impl: str, out: torch.Tensor = y):  # type: ignore[no-untyped-def]
        return lambda out=out: rn.VARIANTS[impl].fn(x, w, out, rn.EPS, rstd)

    ref = rung("cuda:3")(torch.empty_like(x)).clone()
    cands = {f"{impl} (shipped)": rung(impl) for impl in ("cuda:3", "cuda:5", "cuda:6")}
    run = from_copy(path, lambda: rn.VARIANTS["cuda:3"].fn(x, w, y, rn.EPS, rstd))
    nan = from_copy(
        path, lambda: rn.VARIANTS["cuda:3"].fn(x, w, torch.full_like(x, float("nan")), rn.EPS)
    )
    admit(cands, "cuda:3 with .ca", run, ref, 0.0, check=nan)  # the same bits as rung 3
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "fwd", seed=1))
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=20)


def main() -> None:
    args = probe_parser(__doc__, (n for _, n, _ in SHAPES)).parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_ca")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_variants({"ca": with_ca(rn.CU_FILE.read_text())}, Path(tmp), "rmsnorm")["ca"]
        for m, n, dtype_name in SHAPES:
            if not args.n or n in args.n:
                probe(m, n, dtype_name, path, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

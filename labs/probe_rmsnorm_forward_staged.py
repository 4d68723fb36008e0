"""Does QuACK's whole recipe, written in CUDA C, reach QuACK on RMSNorm's long rows?

    python labs/probe_rmsnorm_forward_staged.py              # the rows below, 5 rounds
    python labs/probe_rmsnorm_forward_staged.py --rounds 3 --n 131072 --dtype float32

QuACK's forward stays a little ahead of rungs 4 and 5 at the longest rows, and two probes took
one half of its recipe each. probe_rmsnorm_forward_long.py gave rung 5 QuACK's block shape
(few threads, 8 to 32 vectors each) with the slice in registers and the weights loaded after
the exchange: slower the longer the slice. probe_rmsnorm_forward_weights.py loaded rung 5's
weights early (into shared memory with cp.async, beside x): not faster. QuACK's source
(quack/rmsnorm.py, RMSNorm.kernel) does both at once, in this order: every thread copies its
whole slice of x into shared memory with cp.async, one commit; loads its slice of the weights
into registers while those copies fly; waits; reads x back from shared memory for the sum of
squares; exchanges the sum over the cluster; reads x back again and writes y, each weight
already in a register, so the stores go out back to back.

This probe appends that kernel to a copy of rmsnorm.cu, as a template over (threads, vectors a
thread, cluster), with rung 3's cp.async, rung 5's exchange and rung 5's widening, checks each
candidate against the shipped rung 5 on the whole output (the sum's order differs: within a
tolerance, and into a NaN-filled output), and races it with the shipped rungs 4 and 5 and QuACK
in interleaved rounds, all timed like the lab. CANDIDATES holds, per row, QuACK's own choice
(its rmsnorm_config: 256 threads, the cluster its table gives) and neighbours of it that keep
two blocks on an SM.

Byte model and prediction: the same bytes as every forward (x read, y written, the weights from
L2). If the order of QuACK's steps is what its lead comes from, its own shape here should tie
with QuACK, and the shapes with two blocks per SM (one block's exchange and stores overlapping
the other's loads) may pass it. If the candidates at QuACK's shape stay behind QuACK, the lead
is in something this recipe leaves out (the compiler's code, the copy's layout).

On the H200 it was the copy. With rung 3's cp.async.cg every candidate, QuACK's shape included,
was far behind QuACK and the shipped rungs; with cp.async.ca (what CUTLASS's cp.async does by
default) QuACK's shape and its neighbours passed QuACK and rung 4 at 131072 fp32 (512 threads x 8
vectors over a cluster of 8 the fastest) and came level with rung 5 at the other rows; plain
stores in place of the streaming ones halved the speed, but those plain stores were an
assignment of the vector that compiled to four 32-bit stores per vector (cuobjdump: STG.E where
the streaming kernel has STG.E.EF.128), so that run timed the split, not the cache policy; the
plain variant now stores with __stwb, one 16-byte store (probe_rmsnorm_forward_stores.py times
the policy alone, on rung 5). That kernel is rung 6 (rmsnorm.cu; the
fused-rmsnorm page, section 6). It prints, it writes nothing: the course's numbers come from
``nox -s labs``.
"""

from __future__ import annotations

import ctypes
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

CANDIDATES = {  # (rows, row length, dtype) -> (threads, vectors a thread, cluster, blocks per SM)
    (16384, 131072, "float32"): [  # 32768 vectors a row; QuACK: cluster 4
        (256, 32, 4, 1),
        (512, 16, 4, 1),
        (1024, 8, 4, 1),
        (256, 16, 8, 2),
        (512, 8, 8, 2),
    ],
    (16384, 65536, "float32"): [  # 16384 vectors; QuACK: cluster 2
        (256, 32, 2, 1),
        (512, 16, 2, 1),
        (256, 16, 4, 2),
        (512, 8, 4, 2),
    ],
    (32768, 131072, "bfloat16"): [  # 16384 vectors; QuACK: cluster 8
        (256, 8, 8, 2),
        (256, 32, 2, 1),
        (256, 16, 4, 2),
        (512, 8, 4, 2),
    ],
    (32768, 65536, "bfloat16"): [  # 8192 vectors; QuACK: cluster 4
        (256, 8, 4, 2),
        (512, 8, 2, 2),
        (256, 16, 2, 2),
        (512, 4, 4, 3),
    ],
    (32768, 32768, "bfloat16"): [  # 4096 vectors; QuACK: cluster 2
        (256, 8, 2, 2),
        (128, 8, 4, 4),
        (256, 4, 4, 3),
        (512, 4, 2, 2),
    ],
}
CU_TYPE = {"float32": ("f32", "float"), "bfloat16": ("bf16", "mk_bf16")}
ANCHOR = "MK_FOR_EACH_DTYPE(RMSNORM5)\n"

STAGED = r"""
// probe: QuACK's order of steps. Each thread owns vectors tid + k * THREADS (k < K) of its
// block's slice, copies them into shared memory with cp.async, loads their weights into
// registers while the copies fly, waits, and reads only its own vectors back: no barrier.
// PLAIN: plain 16-byte stores of y instead of store_vec's streaming (.cs) ones; CA: cp.async.ca
// (the copy allocates in L1, as CUTLASS's default cp.async does) instead of cp_async16's .cg.
__device__ __forceinline__ void probe_cp_async16_ca(void* smem, const void* gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

template <typename T, typename W, int THREADS, int CLUSTER, int K, bool PLAIN, bool CA>
__device__ __forceinline__ void rmsnorm_staged(const T* x, const W* w, T* y, float* rstd_out,
                                               long long n, float eps) {
    constexpr int V = Vec<T>::N;
    constexpr int WPV = V / Vec<W>::N;  // weight vectors per vector of x
    extern __shared__ __align__(16) unsigned char staged_smem[];
    Vec<T>* slice = reinterpret_cast<Vec<T>*>(staged_smem);
    __shared__ ClusterExchange<1, THREADS / 32, CLUSTER> xch;
    const unsigned rank = cluster_rank();
    exchange_open(xch);
    const long long row = blockIdx.x / CLUSTER;
    const long long first = static_cast<long long>(rank) * THREADS * K * V;
    const T* xr = x + row * n + first;
    T* yr = y + row * n + first;
    const W* wr = w + first;
    const int tid = threadIdx.x;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = tid + k * THREADS;
        if (CA) probe_cp_async16_ca(slice + i, xr + static_cast<long long>(i) * V);
        else cp_async16(slice + i, xr + static_cast<long long>(i) * V);
    }
    Vec<W> wv[K][WPV];
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int c = 0; c < WPV; ++c) {
            const long long j = static_cast<long long>(tid + k * THREADS) * V + c * Vec<W>::N;
            const uint4 raw = __ldg(reinterpret_cast<const uint4*>(wr + j));
            wv[k][c] = *reinterpret_cast<const Vec<W>*>(&raw);
        }
    }
    cp_async_wait_all();
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const Vec<T> v = slice[tid + k * THREADS];
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = lean_at(v, e);
            ss += f * f;
        }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
    exchange_push(xch, {ss});
    float acc[1] = {0.0f};
    exchange_fold(xch, acc, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
    const float rstd = rsqrtf(acc[0] / static_cast<float>(n) + eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = tid + k * THREADS;
        const Vec<T> v = slice[i];
        Vec<T> out;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float wf = lean_at(wv[k][e / Vec<W>::N], e % Vec<W>::N);
            out.v[e] = from_float<T>(lean_at(v, e) * rstd * wf);
        }
        if (PLAIN) __stwb(reinterpret_cast<uint4*>(yr + static_cast<long long>(i) * V),
                          *reinterpret_cast<const uint4*>(&out));
        else store_vec(yr + static_cast<long long>(i) * V, out);
    }
    if (rstd_out && rank == 0 && threadIdx.x == 0) rstd_out[row] = rstd;
}
"""


VARIANTS = {  # name -> (plain stores, cp.async.ca)
    "": (False, False),
    " plain": (True, False),
    " ca": (False, True),
}


def kernel_name(dtype_name: str, t: int, k: int, c: int, variant: str = "") -> str:
    tag = variant.strip().replace(" ", "_")
    return f"rmsnorm_staged{tag}_t{t}_k{k}_c{c}_{CU_TYPE[dtype_name][0]}_probe"


def variants(launches: list[tuple[int, int, int, int]]) -> list[tuple[tuple[int, ...], str]]:
    """(candidate, variant) pairs of a row: QuACK's shape (the first) with our copy and plain
    stores as well, every candidate with cp.async.ca."""
    return [(launches[0], ""), (launches[0], " plain")] + [(c, " ca") for c in launches]


def with_candidates(src: str) -> str:
    """rmsnorm.cu with rmsnorm_staged and a kernel per candidate (x's dtype for the weight, the
    lab's case), each with the candidate's register budget (__launch_bounds__)."""
    if src.count(ANCHOR) != 1:
        raise SystemExit(f"probe_rmsnorm_forward_staged: rmsnorm.cu changed; update:\n{ANCHOR}")
    extra = [STAGED]
    for (_, _, dtype_name), launches in CANDIDATES.items():
        ctype = CU_TYPE[dtype_name][1]
        for (t, k, c, minb), v in variants(launches):
            plain, ca = (str(b).lower() for b in VARIANTS[v])
            extra.append(
                f'extern "C" __global__ void __cluster_dims__({c}, 1, 1) '
                f"__launch_bounds__({t}, {minb}) {kernel_name(dtype_name, t, k, c, v)}("
                f"const {ctype}* x, const {ctype}* w, {ctype}* y, float* rstd, long long n, "
                f"float eps) {{ rmsnorm_staged<{ctype}, {ctype}, {t}, {c}, {k}, {plain}, {ca}>"
                "(x, w, y, rstd, n, eps); }\n"
            )
    return src.replace(ANCHOR, ANCHOR + "".join(extra))


def check_shape(n: int, dtype_name: str, t: int, k: int, c: int) -> None:
    """Each candidate must make the row exactly: the kernel has no bounds checks."""
    nvec = n // (16 // getattr(torch, dtype_name).itemsize)
    if t * k * c != nvec:
        raise SystemExit(f"probe_rmsnorm_forward_staged: {t} x {k} x {c} vectors is not {n}")


def probe(m: int, n: int, dtype_name: str, path: Path, rounds: int, gbps: float) -> None:
    from minikernel.cuda import get_kernel

    dtype = getattr(torch, dtype_name)
    x, w = rn.make_inputs(m, n, dtype, "cuda", 1)[:2]
    eps = rn.EPS
    rstd = torch.empty(m, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)

    def shipped(rung: int):  # type: ignore[no-untyped-def]
        launch = rn._launch_cuda5 if rung == 5 else rn._launch_cuda4
        return lambda out=y: launch(x, w, out, eps, rstd)

    def candidate(t: int, k: int, c: int, v: str):  # type: ignore[no-untyped-def]
        check_shape(n, dtype_name, t, k, c)
        kernel = get_kernel(path, kernel_name(dtype_name, t, k, c, v))
        kernel.allow_cluster_size(c)
        extra = (ctypes.c_int64(n), ctypes.c_float(eps))

        def run(out: torch.Tensor = y) -> torch.Tensor:
            kernel(m * c, t, (x, w, out, rstd, *extra), shared_mem=t * k * 16)
            return out

        return run

    ref = shipped(5)(torch.empty_like(x)).clone()
    scale = float(ref.float().abs().max())
    tol = (1e-5 if dtype == torch.float32 else 2**-7) * scale  # the sum's order differs
    cands = {"cuda:4 (shipped)": shipped(4), "cuda:5 (shipped)": shipped(5)}
    for (t, k, c, _), v in variants(CANDIDATES[(m, n, dtype_name)]):
        use = get_kernel(path, kernel_name(dtype_name, t, k, c, v)).usage
        run = candidate(t, k, c, v)
        nan = lambda run=run: run(torch.full_like(x, float("nan")))
        admit(cands, f"staged t{t} k{k} c{c}{v}", run, ref, tol, str(use), check=nan)
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "fwd", seed=1))
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=30)


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in CANDIDATES))
    parser.add_argument("--dtype", nargs="*", choices=sorted(CU_TYPE), help="x's dtypes")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_staged")
    with tempfile.TemporaryDirectory() as tmp:
        src = with_candidates(rn.CU_FILE.read_text())
        path = write_variants({"staged": src}, Path(tmp), "rmsnorm")["staged"]
        for m, n, dtype_name in CANDIDATES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(m, n, dtype_name, path, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

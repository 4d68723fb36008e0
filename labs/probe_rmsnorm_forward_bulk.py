"""Does RMSNorm's forward reach QuACK on the long bf16 rows if the copy engine moves the slice?

    python labs/probe_rmsnorm_forward_bulk.py              # the three rows below, 5 rounds
    python labs/probe_rmsnorm_forward_bulk.py --rounds 3 --n 32768

QuACK's forward is still a little ahead of ours on three bf16 rows of lab 02 (32768 x 32768,
65536 and 131072), and every lever the fused-rmsnorm page lists has been probed: the slice and
the cluster, the vectors a thread holds, the weights early, QuACK's own order of steps with
cp.async, cache hints, fewer blocks per SM, a persistent kernel. All of them move x and y with
one 16-byte load or store per thread per vector. Hopper has one more way, which none of our
kernels and not QuACK's forward use: the bulk copies of the Tensor Memory Accelerator
(cp.async.bulk), where one thread asks the copy engine for a whole contiguous slice of global
memory into shared memory, and a transaction barrier (an mbarrier) counts its bytes in.

This probe appends such a kernel to a copy of rmsnorm.cu: thread 0 sets the barrier's byte count
and issues the slice's copy (in one piece or several); every thread waits on the barrier, sums
the squares of its own vectors in shared memory, and the cluster exchanges the sums as rung 5's
does; each thread writes its outputs over its inputs in shared memory, the block meets at one
barrier after a proxy fence (the copy engine reads shared memory through the async proxy), and
thread 0 sends the whole slice back with one bulk store, then waits until the engine has read it
before the block may exit. Without per-thread loads or stores a thread needs few registers, so
shared memory sets the blocks per SM: six blocks of 32 KB (192 KB of x in flight per SM, where
rung 4 has four blocks of 32 KB in registers) or three of 64 KB.

Candidates per row: 32 KB slices over the cluster that makes the row, blocks of 128 or 256
threads; 64 KB slices over half that cluster (one block per 32768-element row, no cluster);
and variants of the first: the load in four pieces, the store with an L2 evict-first policy (as
our stores stream), the weights loaded into registers while the copy flies (QuACK's order). Each
is checked against the shipped rung 5 on the whole output (the sum's order differs: within a
tolerance, into a NaN-filled output) and raced with the shipped rungs 4 and 5 and QuACK in
interleaved rounds, all timed like the lab.

Byte model and prediction: the same bytes as every forward (x read, y written, the weights from
L2), so the same floor. The copy engine takes the per-thread load and store instructions and their
address arithmetic away, and lets shared memory, not registers, set the bytes in flight; if
either is what keeps rung 4 behind QuACK, a 32 KB candidate should tie with QuACK or pass it.
If every candidate stays behind, the lead is not in how the bytes are asked for.

On the H200 (2026-12-03, two runs of 5 rounds) the fastest bulk form was "early" at four blocks
per SM: level with the shipped rungs at 32768 and 65536, QuACK still ahead of all of them, and
a little ahead of QuACK and rung 5 at 131072 (under a per cent). Six blocks per SM (weights after
the exchange, or prefetched into L1) were slower by up to a per cent and a half, the
evict-first store by about two; 16 KB or 64 KB slices and a load in four pieces were no faster.
The fused-rmsnorm page (section 7, rung 5) says more. It prints, it writes nothing: the course's
numbers come from ``nox -s labs``.
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

SLICE_KB = 32  # the slice of most candidates, as rung 4's blocks


def candidates(n: int) -> list[tuple[int, int, int, int, str]]:
    """The candidates for a bf16 row of ``n`` elements: (threads, slice in KB, cluster, blocks
    per SM for __launch_bounds__, variant). 32 KB slices over the cluster that makes the row, in
    blocks of 256 or 128 threads, plain and in each variant; 64 KB slices over half that cluster
    (one block per 32768-element row, no cluster); 16 KB slices over twice it. Every slice is
    whole: its threads x 16 B divide it."""
    c = n * 2 // (SLICE_KB * 1024)
    return [
        (256, 32, c, 6, ""),
        (128, 32, c, 6, ""),
        (512, 64, c // 2, 3, ""),
        (256, 32, c, 6, "chunks4"),
        (256, 32, c, 6, "ef"),
        (256, 32, c, 4, "early"),
        (256, 32, c, 5, "early"),
        (256, 32, c, 6, "wpf"),
        (128, 16, 2 * c, 8, "early"),
    ]


CANDIDATES = {(32768, n): candidates(n) for n in (32768, 65536, 131072)}
VARIANTS = {  # name -> (pieces of the load, evict-first store, weights early, weights to L1)
    "": (1, False, False, False),
    "chunks4": (4, False, False, False),
    "ef": (1, True, False, False),
    "early": (1, False, True, False),
    "wpf": (1, False, False, True),
}
ANCHOR = "MK_FOR_EACH_DTYPE(RMSNORM5)\n"

BULK = r"""
// probe: the slice moved by the copy engine (cp.async.bulk, sm_90). Thread 0 copies the block's
// slice of x into shared memory in PIECES bulk copies that count their bytes into load_bar, and
// after the exchange sends y back with one bulk store. Each thread reads and writes only its
// own vectors tid + k * THREADS (k < K) of the slice in shared memory.
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, unsigned bytes,
                                          unsigned bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        ::"r"(smem_u32(smem)), "l"(gmem), "r"(bytes), "r"(bar)
        : "memory");
}

template <bool EVICT_FIRST>
__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, unsigned bytes) {
    if constexpr (EVICT_FIRST) {
        asm volatile(
            "{\n\t.reg .b64 pol;\n\t"
            "createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n\t"
            "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, pol;\n\t}"
            ::"l"(gmem), "r"(smem_u32(smem)), "r"(bytes)
            : "memory");
    } else {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     ::"l"(gmem), "r"(smem_u32(smem)), "r"(bytes)
                     : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <typename T, typename W, int THREADS, int CLUSTER, int K, int PIECES, bool EVICT_FIRST,
          bool EARLY_W, bool PREFETCH_W>
__device__ __forceinline__ void rmsnorm_bulk(const T* x, const W* w, T* y, float* rstd_out,
                                             long long n, float eps) {
    constexpr int V = Vec<T>::N;
    constexpr int WPV = V / Vec<W>::N;  // weight vectors per vector of x
    constexpr unsigned BYTES = THREADS * K * 16;
    static_assert(BYTES % (PIECES * 16) == 0, "each piece a multiple of 16 bytes");
    extern __shared__ __align__(128) unsigned char bulk_smem[];
    Vec<T>* slice = reinterpret_cast<Vec<T>*>(bulk_smem);
    __shared__ __align__(8) unsigned long long load_bar;
    __shared__ ClusterExchange<1, THREADS / 32, CLUSTER> xch;
    const unsigned rank = cluster_rank();
    const long long row = blockIdx.x / CLUSTER;
    const long long first = static_cast<long long>(rank) * THREADS * K * V;
    const T* xr = x + row * n + first;
    T* yr = y + row * n + first;
    const W* wr = w + first;
    const int tid = threadIdx.x;
    const unsigned bar = smem_u32(&load_bar);
    if (tid == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                     "r"(BYTES)
                     : "memory");
#pragma unroll
        for (int p = 0; p < PIECES; ++p) {
            bulk_load(bulk_smem + p * (BYTES / PIECES),
                      reinterpret_cast<const unsigned char*>(xr) + p * (BYTES / PIECES),
                      BYTES / PIECES, bar);
        }
    }
    exchange_open(xch);
    __syncthreads();  // load_bar is initialised before anyone waits on it
    Vec<W> wv[EARLY_W ? K : 1][WPV];
    if constexpr (EARLY_W) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
#pragma unroll
            for (int c = 0; c < WPV; ++c) {
                const long long j = static_cast<long long>(tid + k * THREADS) * V + c * Vec<W>::N;
                const uint4 raw = __ldg(reinterpret_cast<const uint4*>(wr + j));
                wv[k][c] = *reinterpret_cast<const Vec<W>*>(&raw);
            }
        }
    }
    if constexpr (PREFETCH_W) {  // the weights on their way into L1, no registers held
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const W* p = wr + static_cast<long long>(tid + k * THREADS) * V;
            asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
        }
    }
    mbarrier_wait_parity(bar, 0);
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
        if constexpr (!EARLY_W) {
#pragma unroll
            for (int c = 0; c < WPV; ++c) {
                const long long j = static_cast<long long>(i) * V + c * Vec<W>::N;
                const uint4 raw = __ldg(reinterpret_cast<const uint4*>(wr + j));
                wv[0][c] = *reinterpret_cast<const Vec<W>*>(&raw);
            }
        }
        const Vec<T> v = slice[i];
        Vec<T> out;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float wf = lean_at(wv[EARLY_W ? k : 0][e / Vec<W>::N], e % Vec<W>::N);
            out.v[e] = from_float<T>(lean_at(v, e) * rstd * wf);
        }
        slice[i] = out;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // y visible to the engine
    __syncthreads();
    if (tid == 0) {
        bulk_store<EVICT_FIRST>(yr, bulk_smem, BYTES);
        if (rstd_out && rank == 0) rstd_out[row] = rstd;
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // smem read: may exit
    }
}
"""


def vectors(threads: int, slice_kb: int) -> int:
    """16-byte vectors a thread holds of a slice of ``slice_kb`` KB over ``threads`` threads."""
    return slice_kb * 1024 // (16 * threads)


def kernel_name(n: int, t: int, kb: int, c: int, minb: int, variant: str) -> str:
    tag = f"_{variant}" if variant else ""
    return f"rmsnorm_bulk_n{n}_t{t}_s{kb}_c{c}_b{minb}{tag}_bf16_probe"


def with_candidates(src: str) -> str:
    """rmsnorm.cu with rmsnorm_bulk and a kernel per candidate (bf16 x and weight, the lab's
    case), each with the candidate's register budget (__launch_bounds__)."""
    if src.count(ANCHOR) != 1:
        raise SystemExit(f"probe_rmsnorm_forward_bulk: rmsnorm.cu changed; update:\n{ANCHOR}")
    extra = [BULK]
    for (_, n), launches in CANDIDATES.items():
        for t, kb, c, minb, v in launches:
            pieces, *flags = VARIANTS[v]
            args = f"mk_bf16, mk_bf16, {t}, {c}, {vectors(t, kb)}, {pieces}, "
            args += ", ".join(str(f).lower() for f in flags)
            extra.append(
                f'extern "C" __global__ void __cluster_dims__({c}, 1, 1) '
                f"__launch_bounds__({t}, {minb}) {kernel_name(n, t, kb, c, minb, v)}("
                "const mk_bf16* x, const mk_bf16* w, mk_bf16* y, float* rstd, long long n, "
                f"float eps) {{ rmsnorm_bulk<{args}>(x, w, y, rstd, n, eps); }}\n"
            )
    return src.replace(ANCHOR, ANCHOR + "".join(extra))


def check_shape(n: int, t: int, kb: int, c: int) -> None:
    """Each candidate's slices must make the row exactly: the kernel has no bounds checks."""
    if kb * 1024 * c != n * 2 or vectors(t, kb) * t * 16 != kb * 1024:
        raise SystemExit(f"probe_rmsnorm_forward_bulk: {c} x {kb} KB over {t} threads is not {n}")


def probe(m: int, n: int, path: Path, rounds: int, gbps: float) -> None:
    from minikernel.cuda import get_kernel

    dtype = torch.bfloat16
    x, w = rn.make_inputs(m, n, dtype, "cuda", 1)[:2]
    eps = rn.EPS
    rstd = torch.empty(m, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)

    def shipped(rung: int):  # type: ignore[no-untyped-def]
        launch = rn._launch_cuda5 if rung == 5 else rn._launch_cuda4
        return lambda out=y: launch(x, w, out, eps, rstd)

    def candidate(t: int, kb: int, c: int, minb: int, v: str):  # type: ignore[no-untyped-def]
        check_shape(n, t, kb, c)
        kernel = get_kernel(path, kernel_name(n, t, kb, c, minb, v))
        if c > 1:
            kernel.allow_cluster_size(c)
        extra = (ctypes.c_int64(n), ctypes.c_float(eps))

        def run(out: torch.Tensor = y) -> torch.Tensor:
            kernel(m * c, t, (x, w, out, rstd, *extra), shared_mem=kb * 1024)
            return out

        return run

    ref = shipped(5)(torch.empty_like(x)).clone()
    tol = 2**-7 * float(ref.float().abs().max())  # the sum's order differs
    cands = {"cuda:4 (shipped)": shipped(4), "cuda:5 (shipped)": shipped(5)}
    for t, kb, c, minb, v in CANDIDATES[(m, n)]:
        use = get_kernel(path, kernel_name(n, t, kb, c, minb, v)).usage
        run = candidate(t, kb, c, minb, v)
        nan = lambda run=run: run(torch.full_like(x, float("nan")))
        label = f"bulk t{t} {kb}KB c{c} b{minb}{' ' + v if v else ''}"
        admit(cands, label, run, ref, tol, str(use), check=nan)
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "fwd", seed=1))
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} bfloat16", ideal, race(cands, rounds), width=30)


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n in CANDIDATES))
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_bulk")
    with tempfile.TemporaryDirectory() as tmp:
        src = with_candidates(rn.CU_FILE.read_text())
        path = write_variants({"bulk": src}, Path(tmp), "rmsnorm")["bulk"]
        for m, n in CANDIDATES:
            if not args.n or n in args.n:
                probe(m, n, path, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

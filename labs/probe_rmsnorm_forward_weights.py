"""Does RMSNorm's forward wait on its weights at long rows, and can it stop?

    python labs/probe_rmsnorm_forward_weights.py              # the lab's long rows, 5 rounds
    python labs/probe_rmsnorm_forward_weights.py --rounds 3 --n 131072

Rung 5 (rmsnorm5 in rmsnorm.cu) moves the byte model's bytes, yet at the longest rows it runs a
little behind softmax's rung 16, which moves the same bytes (read x, write y) with more
arithmetic and no weights. RMSNorm's blocks also read their slice of the weights in every row:
from L2, after the cluster's exchange, one vector at a time (each load waits for the store
before it). This probe times, in interleaved rounds on the same x:

    cuda:5, cuda:4       as shipped, with a weight in x's dtype (the lab's case)
    cuda:4 no w          rung 4 without a weight: the same x and y, no weight read at all
    softmax cuda:16      softmax on the same x: the same bytes, no weight
    early                rung 5 with each thread's weights copied into shared memory with
                         cp.async right after its loads of x, so that they travel with x and
                         during the exchange; one wait, then each thread reads back its own
    persistent           rung 5 made persistent: as many clusters as the GPU holds at once,
                         cluster g walking rows g, g + G, ...; each block copies its slice of
                         the weights into shared memory once and reads it there in every row
    cuda:5 + smem        rung 5 as shipped, launched with as much dynamic shared memory as
                         early asks for, unused: what holding that shared memory alone costs
    copy                 y.copy_(x), the ceiling's own kernel

early and persistent are kernels written here and appended to a copy of rmsnorm.cu; the probe
checks both bit for bit against rung 5 (the same sums in the same order). The fused-rmsnorm
page (section 7, rung 5) says what an H200 showed. It prints, it writes nothing: the course's
numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import ctypes

import torch

import minikernel.kernels.rmsnorm as rn
import minikernel.kernels.softmax.cuda_kernels as ck
from minikernel.bench.probe import gpu_ceiling, kernel_source, probe_parser, race, report

SHAPES = [  # (rows, row length, dtype): the lab's rows where rung 5 runs its own kernel
    (32768, 131072, "bfloat16"),
    (32768, 65536, "bfloat16"),
    (32768, 32768, "bfloat16"),
    (16384, 131072, "float32"),
    (16384, 65536, "float32"),
]
EPS = 1e-6
SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
SHAPES_CU = ((512, 2), (512, 4), (512, 8), (1024, 8), (1024, 16))  # rung 5's (threads, cluster)

KERNELS = r"""
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// probe_rmsnorm_forward_weights: two ways for rung 5 to stop reading its weights from L2 after
// the exchange. Both hold a thread's K weight vectors in dynamic shared memory, at
// k * THREADS + tid, where only that thread writes and reads them (no barrier).

// A thread's K vectors of one row, all loads in flight before any is used (rung 5's).
template <typename T, int THREADS>
__device__ __forceinline__ void probe_load(const T* xr, Vec<T> (&xv)[KERNEL5_VECS]) {
    constexpr int V = Vec<T>::N;
#pragma unroll
    for (int k = 0; k < KERNEL5_VECS; ++k)
        xv[k] = load_vec_plain(xr + static_cast<long long>(threadIdx.x + k * THREADS) * V);
}

// Their sum of squares over the warp (rung 5's order); the caller exchanges it.
template <typename T>
__device__ __forceinline__ float probe_sum(Vec<T> (&xv)[KERNEL5_VECS]) {
    constexpr int V = Vec<T>::N;
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < KERNEL5_VECS; ++k) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = lean_at(xv[k], e);
            ss += f * f;
        }
    }
    if constexpr (sizeof(T) == 2) {  // keep x packed, as rung 5 does
#pragma unroll
        for (int k = 0; k < KERNEL5_VECS; ++k) {
            uint4& r = reinterpret_cast<uint4&>(xv[k]);
            asm volatile("" : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w));
        }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
    return ss;
}

template <typename T, int THREADS>
__device__ __forceinline__ void probe_write(T* yr, const Vec<T> (&xv)[KERNEL5_VECS],
                                            const uint4* wslice, float rstd) {
    constexpr int V = Vec<T>::N;
    const int tid = threadIdx.x;
#pragma unroll
    for (int k = 0; k < KERNEL5_VECS; ++k) {
        const uint4 raw = wslice[k * THREADS + tid];
        const Vec<T>& wv = *reinterpret_cast<const Vec<T>*>(&raw);
        Vec<T> out;
#pragma unroll
        for (int e = 0; e < V; ++e)
            out.v[e] = from_float<T>(lean_at(xv[k], e) * rstd * lean_at(wv, e));
        store_vec(yr + static_cast<long long>(tid + k * THREADS) * V, out);
    }
}

// early: rung 5's row per cluster, the weights copied with cp.async after the loads of x.
template <typename T, int THREADS, int CLUSTER>
__device__ __forceinline__ void probe_early(const T* x, const T* w, T* y, float* rstd_out,
                                            long long n, float eps, int per_block) {
    constexpr int V = Vec<T>::N;
    __shared__ ClusterExchange<1, THREADS / 32, CLUSTER> xch;
    extern __shared__ uint4 wslice[];
    const unsigned rank = cluster_rank();
    exchange_open(xch);
    const long long row = blockIdx.x / CLUSTER;
    const long long first = static_cast<long long>(rank) * per_block * V;
    const int tid = threadIdx.x;
    Vec<T> xv[KERNEL5_VECS];
    probe_load<T, THREADS>(x + row * n + first, xv);
#pragma unroll
    for (int k = 0; k < KERNEL5_VECS; ++k) {
        const long long i = first + static_cast<long long>(tid + k * THREADS) * V;
        cp_async16(&wslice[k * THREADS + tid], w + i);
    }
    exchange_push(xch, {probe_sum<T>(xv)});
    float acc[1] = {0.0f};
    exchange_fold(xch, acc, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
    const float rstd = rsqrtf(acc[0] / static_cast<float>(n) + eps);
    cp_async_wait_all();
    probe_write<T, THREADS>(y + row * n + first, xv, wslice, rstd);
    if (rstd_out && rank == 0 && tid == 0) rstd_out[row] = rstd;
}

// persistent: G clusters walk the rows; each block's weights copied once, before the first.
template <typename T, int THREADS, int CLUSTER>
__device__ __forceinline__ void probe_persistent(const T* x, const T* w, T* y, float* rstd_out,
                                                 long long m, long long n, float eps) {
    constexpr int V = Vec<T>::N;
    __shared__ RowExchange<1, THREADS / 32, CLUSTER> xch;
    extern __shared__ uint4 wslice[];
    const unsigned rank = cluster_rank();
    const int tid = threadIdx.x;
    const long long first = static_cast<long long>(rank) * THREADS * KERNEL5_VECS * V;
#pragma unroll
    for (int k = 0; k < KERNEL5_VECS; ++k) {
        const long long i = first + static_cast<long long>(tid + k * THREADS) * V;
        wslice[k * THREADS + tid] = *reinterpret_cast<const uint4*>(w + i);
    }
    row_exchange_open(xch);
    int visit = 0;
    for (long long row = blockIdx.x / CLUSTER; row < m; row += gridDim.x / CLUSTER, ++visit) {
        Vec<T> xv[KERNEL5_VECS];
        probe_load<T, THREADS>(x + row * n + first, xv);
        const float mine[1] = {probe_sum<T>(xv)};
        float acc[1] = {0.0f};
        row_exchange(xch, visit, mine, acc, [](float (&a)[1], const float (&b)[1]) {
            a[0] += b[0];
        });
        const float rstd = rsqrtf(acc[0] / static_cast<float>(n) + eps);
        probe_write<T, THREADS>(y + row * n + first, xv, wslice, rstd);
        if (rstd_out && rank == 0 && tid == 0) rstd_out[row] = rstd;
    }
}

#define PROBE_ENTRIES(SFX, T, THREADS, CLUSTER)                                                 \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1)                                  \
        __launch_bounds__(THREADS, 2048 / THREADS) probe_early_t##THREADS##_c##CLUSTER##_##SFX( \
            const T* x, const T* w, T* y, float* rstd, long long n, float eps, int per_block) {  \
        probe_early<T, THREADS, CLUSTER>(x, w, y, rstd, n, eps, per_block);                     \
    }                                                                                           \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1)                                  \
        __launch_bounds__(THREADS, 2048 / THREADS)                                              \
        probe_persistent_t##THREADS##_c##CLUSTER##_##SFX(                                       \
            const T* x, const T* w, T* y, float* rstd, long long m, long long n, float eps) {    \
        probe_persistent<T, THREADS, CLUSTER>(x, w, y, rstd, m, n, eps);                        \
    }
"""
KERNELS += "".join(
    f"PROBE_ENTRIES({sfx}, {t}, {threads}, {cluster})\n"
    for sfx, t in (("f32", "float"), ("bf16", "mk_bf16"))
    for threads, cluster in SHAPES_CU
)
KERNELS += "#endif\n"


def with_probe_kernels(src: str) -> str:
    """rmsnorm.cu with the probe's two kernels after it (they use its lean_at, KERNEL5_VECS
    and cluster.cuh's exchanges). Fails if rmsnorm.cu no longer has what they use."""
    for name in ("KERNEL5_VECS", "lean_at(", '#include "cluster.cuh"'):
        if name not in src:
            raise SystemExit(f"probe_rmsnorm_forward_weights: rmsnorm.cu has no {name}")
    return src + KERNELS


def probe_kernel(kind: str, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor):  # type: ignore[no-untyped-def]
    """A callable that runs the probe's ``kind`` kernel ("early" or "persistent") on x, from
    rn.CU_FILE (the probe's copy while the caller is inside kernel_source)."""
    from minikernel.cuda import get_kernel

    m, n = x.shape
    sp = rn.plan5(m, n, x.dtype, torch.cuda.get_device_capability(x.device), True)
    if sp is None:
        raise SystemExit(f"probe_rmsnorm_forward_weights: rung 5 has no plan for {m} x {n}")
    kernel = get_kernel(rn.CU_FILE, f"probe_{kind}_t{sp.threads}_c{sp.cluster}_{SUFFIX[x.dtype]}")
    kernel.allow_cluster_size(sp.cluster)
    smem = sp.per_block * 16
    null = ctypes.c_void_p(0)
    if kind == "early":
        args = (x, w, y, null, ctypes.c_int64(n), ctypes.c_float(EPS), ctypes.c_int32(sp.per_block))
        return lambda: kernel(m * sp.cluster, sp.threads, args, shared_mem=smem)
    clusters = max(1, min(m, kernel.max_active_clusters(sp.threads, smem, sp.cluster)))
    args = (x, w, y, null, ctypes.c_int64(m), ctypes.c_int64(n), ctypes.c_float(EPS))
    return lambda: kernel(clusters * sp.cluster, sp.threads, args, shared_mem=smem)


def probe(m: int, n: int, dtype_name: str, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x, w = rn.make_inputs(m, n, dtype, "cuda", 0)
    y = torch.empty_like(x)
    v = rn.VARIANTS
    sp = rn.plan5(m, n, dtype, torch.cuda.get_device_capability(), True)
    cands = {
        "cuda:5": lambda: v["cuda:5"].fn(x, w, y, EPS),
        "cuda:4": lambda: v["cuda:4"].fn(x, w, y, EPS),
        "cuda:4 no w": lambda: v["cuda:4"].fn(x, None, y, EPS),
        "softmax cuda:16": lambda: ck.launch(16, x, y),
        "cuda:5 + smem": lambda: rn._launch_slices(5, sp, x, w, y, EPS, None, sp.per_block * 16),
        "copy": lambda: y.copy_(x),
    }
    want = torch.empty_like(x)
    v["cuda:5"].fn(x, w, want, EPS)
    for kind in ("early", "persistent"):
        run = probe_kernel(kind, x, w, y)
        y.fill_(float("nan"))
        run()
        same = torch.equal(y, want)
        print(f"  {m} x {n} {dtype_name} {kind}: {'same bits' if same else 'DIFFERS'}")
        if same:
            cands[kind] = run
    del want
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=16)


def main() -> None:
    args = probe_parser(__doc__, (s[1] for s in SHAPES)).parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_weights")
    text = with_probe_kernels(rn.CU_FILE.read_text())
    with kernel_source(rn, text, "rmsnorm_weights_probe.cu"):
        for m, n, dtype_name in SHAPES:
            if not args.n or n in args.n:
                probe(m, n, dtype_name, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

// cross_entropy.cu: loss and gradient of each row of (T, V) logits, the row read from DRAM once.
//
// For a row x of V logits, target t and label smoothing e (the formulas of triton_kernels.py):
//     m = max_j x_j,   log_s = log sum_j exp(x_j - m)
//     loss = log_s + (1 - e) * (m - x_t) - (e / V) * sum_j (x_j - m)
//     dloss/dx_j = exp(x_j - m - log_s) - (1 - e) * [j == t] - e / V      (times a scale)
//
// The Triton kernel reads a 128K-class row twice (once for log_s, once for the gradient, the
// second time hoping for L2) because one program cannot hold 256 KB. Here a thread-block
// cluster holds it: the row is cut into slices of at most ~64 KB (cluster.cuh), each block
// stages its slice in shared memory, the blocks agree on (m, sum of exp) over DSMEM at a single
// cluster barrier (the online softmax merge), and each block writes its slice of the gradient
// from shared memory. DRAM traffic is the byte model's
// 2 * T * V * b (read x, write dx), against ~3 * T * V * b for a second read that misses L2.
//
// The budget that shapes the passes: an H200 SM's share of the DRAM ceiling is ~17 bytes per
// clock, ~4 bf16 logits per clock once each is read and its gradient written, and the SM does
// 16 exps (MUFU ops) per clock. Computing exp(x - m) twice per element (once for the sum, once
// for the gradient) would take half of those clocks; the kernel computes it once, keeps it in
// shared memory in place of x, and the gradient pass is one multiply-add per element.
//
// Predicted, H200 (~4.3 TB/s copy ceiling), 8192 x 128256 bf16, loss and gradient: 4.2 GB
// moved, ~1.0 ms at the ceiling, ~1.1 ms at 90%; the Triton kernel's second read of each row
// puts it past ~1.5 ms even when that read hits L2 half of the time.
//
// Needs sm_90+ (clusters). The host sends here only rows whose x and dx are equally aligned
// modulo 16 bytes (every row splits into the same scalar head, 16-byte body and scalar tail).
// minikernel: max-registers 80 (fp32 with label smoothing in clusters of 8 holds the 24 DSMEM
// reads of the cluster merge at once: 76 registers x 256 threads x 3 blocks still fit an SM's
// 65536, so the three blocks that shared memory allows per SM stay resident)
#include "cluster.cuh"
#include "common.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

// Block-wide sum of one float for blocks of 32 * k threads; every thread must call it and every
// thread gets the result. `scratch` holds 33 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
        if (lane == 0) scratch[32] = w;
    }
    __syncthreads();
    const float r = scratch[32];
    __syncthreads();  // scratch is reused by the next call
    return r;
}

// Sum of slot `k` of `partial` over the CLUSTER blocks, in rank order: the same bits in every
// block. The caller has made the slots visible with a cluster barrier.
template <int CLUSTER> __device__ __forceinline__ float cluster_sum(const float* partial, int k) {
    float r = 0.f;
#pragma unroll
    for (int b = 0; b < CLUSTER; ++b) r += ld_dsmem(partial + k, b);
    return r;
}

// What a thread, a warp, a block or a cluster knows about its part of a row: the max m of its
// logits, s = sum of exp(x - m) over them, and x[target] if it holds the target (else 0). Two
// parts merge by rescaling both sums to the larger max (the online softmax of softmax.cu);
// a max of -inf (no logits yet, or only -inf) shifts by 0 so that -inf - -inf never appears.
struct Part {
    float m, s, xt;
};

__device__ __forceinline__ Part merge(Part a, Part b) {
    const float m = fmaxf(a.m, b.m);
    const float shift = m == MK_NEG_INF ? 0.f : m;
    // __fmul_rn: no FMA contraction, so merge(a, b) and merge(b, a) give the same bits.
    return {m, __fmul_rn(a.s, __expf(a.m - shift)) + __fmul_rn(b.s, __expf(b.m - shift)),
            a.xt + b.xt};
}

// Every thread of the block gets the merge of every thread's part. `scratch` holds 99 floats.
__device__ __forceinline__ Part block_merge(Part t, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        t = merge(t, {__shfl_xor_sync(0xffffffffu, t.m, o), __shfl_xor_sync(0xffffffffu, t.s, o),
                      __shfl_xor_sync(0xffffffffu, t.xt, o)});
    }
    if (lane == 0) {
        scratch[warp] = t.m;
        scratch[33 + warp] = t.s;
        scratch[66 + warp] = t.xt;
    }
    __syncthreads();
    if (warp == 0) {
        const bool live = lane < static_cast<int>(blockDim.x >> 5);
        Part w = {live ? scratch[lane] : MK_NEG_INF, live ? scratch[33 + lane] : 0.f,
                  live ? scratch[66 + lane] : 0.f};
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            w = merge(w, {__shfl_xor_sync(0xffffffffu, w.m, o),
                          __shfl_xor_sync(0xffffffffu, w.s, o),
                          __shfl_xor_sync(0xffffffffu, w.xt, o)});
        }
        if (lane == 0) {
            scratch[32] = w.m;
            scratch[65] = w.s;
            scratch[98] = w.xt;
        }
    }
    __syncthreads();
    const Part r = {scratch[32], scratch[65], scratch[98]};
    __syncthreads();  // scratch may be reused by the caller
    return r;
}

// --8<-- [start:kernel]
template <typename T, int THREADS, int CLUSTER, bool SMOOTH>
__device__ __forceinline__ void cross_entropy1(const T* x, long long stride_x,
                                               const long long* target, float* loss,
                                               float* stats, T* dx, long long stride_dx,
                                               const float* n_valid, long long V,
                                               long long ignore_index, float smoothing,
                                               int per_block) {
    constexpr int VN = Vec<T>::N;
    extern __shared__ __align__(16) unsigned char ce_smem[];
    Vec<T>* slice = reinterpret_cast<Vec<T>*>(ce_smem);
    __shared__ float scratch[99];
    __shared__ float partial[4];  // this block's max, sum of exp, x[tgt] or 0; smoothing's sum
    const int tid = threadIdx.x;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    const long long row = blockIdx.x / CLUSTER;
    const T* xr = x + row * stride_x;
    T* dr = dx ? dx + row * stride_dx : nullptr;
    const RowSplit sp = split_row(xr, V);
    const Slice s = slice_of(static_cast<int>(sp.nvec), per_block, rank);
    const long long body = sp.head + static_cast<long long>(s.first) * VN;  // first column here
    const int n_edge = rank == 0 ? sp.head + sp.tail : 0;  // block 0 also takes the edges

    // 1. stage the slice, each thread folding the max of its own vectors. The target is not
    // waited for first: a load whose address depends on another load would cost two DRAM
    // round trips before the first byte of the row is even requested.
    float m = MK_NEG_INF;
    stage_vectors<T, THREADS>(xr + body, slice, s.count, [&](const Vec<T>& v) {
#pragma unroll
        for (int k = 0; k < VN; ++k) m = fmaxf(m, to_float(v.v[k]));
    });
    long long e_idx;
    const float e = edge_value(xr, sp, tid, n_edge, e_idx);
    m = fmaxf(m, e);
    const long long tgt = target[row];
    if (tgt == ignore_index) {  // the whole cluster takes this branch together: no barrier
        if (rank == 0 && tid == 0) {
            loss[row] = 0.f;
            stats[2 * row] = 0.f;
            stats[2 * row + 1] = 0.f;
        }
        if (dr) {
            Vec<T> zero;
#pragma unroll
            for (int k = 0; k < VN; ++k) zero.v[k] = from_float<T>(0.f);
            for (int i = tid; i < s.count; i += THREADS) store_vec(dr + body + i * VN, zero);
            if (tid < n_edge) dr[e_idx] = from_float<T>(0.f);
        }
        return;
    }
    const bool in_range = tgt >= 0 && tgt < V;  // else: a caller's bug, reported as NaN
    // x[tgt] from where it was staged: vector i went to thread i % THREADS of the one block
    // whose slice holds it (or it is an edge element).
    float xt = 0.f;
    bool owns_target = false;  // this thread staged (and will write) the target's vector
    if (tgt >= body && tgt < body + static_cast<long long>(s.count) * VN) {
        const long long i = (tgt - body) / VN;
        owns_target = i % THREADS == tid;
        if (owns_target) xt = to_float(slice[i].v[(tgt - body) % VN]);
    }
    if (tid < n_edge && e_idx == tgt) xt = e;

    // 2. p = exp(x - m_thread) over this thread's vectors, summed and kept in place of x
    // (rounded to T, like the gradient will be): the only exp of each element. Each thread
    // reads back only the vectors it wrote, so no barrier is needed.
    const float shift_t = m == MK_NEG_INF ? 0.f : m;
    float se = 0.f, sd = 0.f;  // sd: sum of (x - m_thread), for label smoothing
    for (int i = tid; i < s.count; i += THREADS) {
        Vec<T> v = slice[i];
#pragma unroll
        for (int k = 0; k < VN; ++k) {
            const float d = to_float(v.v[k]) - shift_t;
            const float p = __expf(d);
            se += p;
            if (SMOOTH) sd += d;
            v.v[k] = from_float<T>(p);
        }
        slice[i] = v;
    }
    if (tid < n_edge) {
        se += __expf(e - shift_t);
        if (SMOOTH) sd += e - shift_t;
    }

    // 3. one (max, sum, x[tgt]) per block, then per cluster over DSMEM: one cluster barrier.
    Part r = block_merge({m, se, xt}, scratch);
    if (CLUSTER > 1) {
        if (tid == 0) {
            partial[0] = r.m;
            partial[1] = r.s;
            partial[2] = r.xt;
        }
        cluster_sync_thread0();
        r = {MK_NEG_INF, 0.f, 0.f};
#pragma unroll
        for (int b = 0; b < CLUSTER; ++b) {  // in rank order in every block: the same bits
            r = merge(r, {ld_dsmem(partial, b), ld_dsmem(partial + 1, b), ld_dsmem(partial + 2, b)});
        }
    }
    const float shift = r.m == MK_NEG_INF ? 0.f : r.m;  // a row of only -inf shifts by 0
    if (SMOOTH) {
        // sum_j (x_j - m) = sum over threads of sd + n * (m_thread - m), n its element count;
        // a second reduction, which only rows with label smoothing pay.
        const int n_t = (s.count > tid ? (s.count - tid + THREADS - 1) / THREADS : 0) * VN +
                        (tid < n_edge ? 1 : 0);
        sd = block_sum(n_t ? sd + n_t * (shift_t - shift) : 0.f, scratch);
        if (CLUSTER > 1) {
            if (tid == 0) partial[3] = sd;
            cluster_sync_thread0();
            sd = cluster_sum<CLUSTER>(partial, 3);
        }
    }
    if (CLUSTER > 1) cluster_arrive();  // done reading the others' shared memory
    const float x_t = in_range ? r.xt : __int_as_float(0x7fc00000);
    const float log_s = __logf(r.s);
    const float uniform = smoothing / static_cast<float>(V);
    if (rank == 0 && tid == 0) {
        float l = log_s + (1.f - smoothing) * (shift - x_t);
        if (SMOOTH) l -= uniform * sd;
        loss[row] = l;
        stats[2 * row] = shift;
        stats[2 * row + 1] = log_s;
    }

    // 4. the gradient of the slice from the kept p: p * exp(m_thread - m) / s * scale - e / V *
    // scale, one multiply-add per element. A thread whose logits are all -inf has p = 0 and
    // factor 0 (not exp(0 - m), which may overflow); a row of only -inf has s = 0 and gets
    // 0 * inf = NaN, like the formula. The target's element (minus 1 - e) is written again
    // afterwards by the thread that wrote its vector, instead of comparing every column with it.
    if (dr) {
        float scale = n_valid ? 1.f / n_valid[0] : 1.f;
        if (!in_range) scale = __int_as_float(0x7fc00000);
        const float k_p = (m == MK_NEG_INF ? 0.f : __expf(shift_t - shift)) * (scale / r.s);
        const float k_0 = -uniform * scale;
        for (int i = tid; i < s.count; i += THREADS) {
            Vec<T> v = slice[i];
#pragma unroll
            for (int k = 0; k < VN; ++k) v.v[k] = from_float<T>(fmaf(to_float(v.v[k]), k_p, k_0));
            store_vec(dr + body + static_cast<long long>(i) * VN, v);
        }
        const float hit = 1.f - smoothing;
        if (tid < n_edge) {
            float p = __expf(e - shift - log_s) - uniform;
            if (e_idx == tgt) p -= hit;
            dr[e_idx] = from_float<T>(p * scale);
        }
        if (owns_target) {  // after this thread's own vector store: program order keeps this one
            dr[tgt] = from_float<T>((__expf(x_t - shift - log_s) - uniform - hit) * scale);
        }
    }
    if (CLUSTER > 1) cluster_wait();  // keep `partial` alive until every block has read it
}
// --8<-- [end:kernel]

#define CE_ENTRY(SUFFIX, T, THREADS, CLUSTER, SMOOTH, SM, DIMS)                                 \
    extern "C" __global__ void DIMS __launch_bounds__(THREADS)                                  \
        cross_entropy_kernel1_t##THREADS##_c##CLUSTER##SM##_##SUFFIX(                           \
            const T* x, long long stride_x, const long long* target, float* loss, float* stats, \
            T* dx, long long stride_dx, const float* n_valid, long long V,                      \
            long long ignore_index, float smoothing, int per_block) {                           \
        cross_entropy1<T, THREADS, CLUSTER, SMOOTH>(x, stride_x, target, loss, stats, dx,       \
                                                    stride_dx, n_valid, V, ignore_index,        \
                                                    smoothing, per_block);                      \
    }
#define CE_SMOOTH(SUFFIX, T, THREADS, CLUSTER, DIMS)                                            \
    CE_ENTRY(SUFFIX, T, THREADS, CLUSTER, false, , DIMS)                                        \
    CE_ENTRY(SUFFIX, T, THREADS, CLUSTER, true, _ls, DIMS)
// What the host launches (slices.py): a row of up to 64 KB in one block of 128, 256 or 512
// threads; longer rows in clusters of 2, 4 or 8 blocks of 256 or 512 threads.
#define CE_SIZES(SUFFIX, T) \
    CE_SMOOTH(SUFFIX, T, 128, 1, ) \
    CE_SMOOTH(SUFFIX, T, 256, 1, ) \
    CE_SMOOTH(SUFFIX, T, 512, 1, ) \
    CE_SMOOTH(SUFFIX, T, 256, 2, __cluster_dims__(2, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 512, 2, __cluster_dims__(2, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 256, 4, __cluster_dims__(4, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 256, 8, __cluster_dims__(8, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 512, 8, __cluster_dims__(8, 1, 1))
MK_FOR_EACH_DTYPE(CE_SIZES)

#endif  // __CUDA_ARCH__ >= 900

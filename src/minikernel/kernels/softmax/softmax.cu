// softmax.cu: y = softmax(x) along each row of a row-major (M, N) matrix,
//             y[r, j] = exp(x[r, j] - max_r) / sum_k exp(x[r, k] - max_r).
//
// Versions (one idea each; the registry key is cuda:N):
//   softmax_kernel1  naive: one thread per row, three passes over global memory (max, sum, write)
//   softmax_kernel2  one block per row: the row is loaded once, coalesced, into shared memory;
//                    thread 0 finds the max and the sum serially
//   softmax_kernel3  parallel reductions: warp shuffles, then one value per warp through shared memory
//   softmax_kernel4  online softmax: max and sum in one sweep and one block reduction
//                    (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax")
//   softmax_kernel5  16-byte vectors between global and shared memory; the row kept in its own dtype
//   softmax_kernel6  the row lives in registers: all its loads in flight at once, no shared copy
//   softmax_kernel7  short rows: one warp per row, four rows per block, no block barrier at all
//   softmax_kernel8  rows of any length: loop over the row with the online recurrence, then walk it
//                    again backwards so that the second read finds the row's tail still in L2
//   softmax_kernel9  long rows: one row split over a thread-block cluster (sm_90+); the blocks
//                    combine their (max, sum) through distributed shared memory, one read in total
//   softmax_kernel10 the same split, but each block stages its slice in shared memory (~64 KB)
//                    instead of registers, so three blocks share an SM; exp(x - m) is computed
//                    once per element and kept there for the write; rows of 16 KB and more
//   softmax_kernel11 rungs 7 and 6 with one exponential per element: p = exp(x - m_t) kept in
//                    the registers in place of x and scaled once the row's (max, sum) is known;
//                    rows of up to 16 KB (longer ones as kernel10)
//   softmax_kernel12 kernel10 plus a hint: once a block has its slice, it asks L2 to fetch the same
//                    slice of a row ~8 MB further down the matrix (prefetch.global.L2), which a
//                    block launched later will read; fp32 rows of 16 KB and more
//   softmax_kernel13 kernel12 with fewer instructions per element: exp as ex2.approx.ftz (no
//                    subnormal fix-up around it) and bf16 elements widened with one LOP3
//   softmax_kernel14 long rows split over a cluster again, each block's slice in registers in
//                    QuACK's shape (256 threads x 8 vectors, p kept in fp32); 16-bit rows of
//                    16-512 KB, fp32 rows of 256 KB-1 MB; other rows as kernel13
//   softmax_kernel15 short rows in groups of 1 to 32 lanes sized to the row, each lane holding
//                    exactly the vectors the row needs (no -inf padding to exponentiate) and
//                    the shift folded into one FFMA per element; longer rows as kernel14
//   softmax_kernel16 kernel14 with fewer instructions per thread: the exponent's shift folded
//                    into one FFMA, the (max, sum) reduced max first, 1/s as rcp.approx; and fp32
//                    rows of 256 KB over a cluster too; short rows as kernel15, others as kernel14
//
// Byte model: read x once, write y once: 2 * M * N * sizeof(T) bytes. Softmax does ~5 flops per
// element, so at any size that fills the GPU it is memory-bound and its speed limit is DRAM
// bandwidth; kernel8 is the exception that reads x twice (the second time mostly from L2).
//
// Predicted time on an H200 (copy ceiling ~4.3 TB/s), before measuring (the lab measures them):
//                  B=512, V=600 fp32 (2.5 MB)          32768 x 4096 bf16 (537 MB, 125 us at 4.3 TB/s)
//   kernel1        ~50 us: 512 threads each walk 1800  ~3 ms: each thread streams its own row
//                  elements one after another           three times, 32 different rows per warp load
//   kernel2        ~15 us: thread 0 loops 1200 times    ~4 ms: 8192 serial smem steps per row, two
//                  per row while 1023 threads wait      1024-thread blocks per SM, 124 waves
//   kernel3        ~4 us: launch + two block reductions ~190 us (~65%): 2-byte scalar loads, fp32
//                                                       row in shared memory, two block reductions
//   kernel4        ~3.5 us: one reduction fewer         ~175 us: one block reduction instead of two
//   kernel5        ~3 us                                ~155 us (~80%): one LDG.128 per 8 elements
//   kernel6        ~3 us                                ~140 us (~90%): every load of the row issued
//                                                       before the first one is needed
//   kernel7        ~2.5 us (launch-bound floor)         same as kernel6 (rows too long for a warp)
//   kernel8/9      same as kernel7 at short rows; at 32768 x 262144 bf16 (34 GB, 8 ms at 4.3 TB/s)
//                  kernel8 re-reads a part of each row from DRAM (~10 ms), kernel9 reads once (~8.5 ms)
//   kernel10       written after kernel9 measured slower than kernel8 there (one 1024-thread block
//                  per SM, idle at every barrier): three blocks per SM should bring it to ~8.5-9 ms
//   kernel11       written after lab 02's profile of kernel6 at 32768 x 4096 bf16 (under 90% of
//                  the ceiling, its warps more often ready than waiting on memory): half the
//                  exponentials, ~131 us (~96%, triton:1's level); at B=512, V=600 no change
//   kernel12       written after lab 02 measured kernel10 under 93% of the ceiling on rows of
//                  128 KB and more (its blocks sit at the cluster barrier with no load in flight)
//                  and a side probe of the hint at six long-row shapes: from kernel10's level
//                  (no gain, if L2 keeps nothing) to the copy ceiling (if every later read hits L2)
//   kernel13       written after a side ncu profile at 32768 x 65536 bf16 counted kernel10's warp
//                  instructions at 2.3 times QuACK's, with 71% of its issue slots busy: if the
//                  issue slots are the limit, ~7% off the bf16 static instruction count should
//                  show; if DRAM is, no change (the lab decides which)
//   kernel14       written after kernel13 left the long bf16 rows where they were (so the issue
//                  slots were not their limit) and RMSNorm's rung 4 gained from the same move to
//                  registers: long 16-bit rows at QuACK's level, ~96% of the ceiling
//   kernel15       written after lab 02 measured QuACK ahead on short rows (32768 x 600 bf16 and
//                  the batch sweep at V = 600), where rung 13 exponentiates up to 41% padding: at
//                  B=512, V=600 one warp's serial path shorter by those instructions (~1.8 us);
//                  32768 x 600 bf16 (79 MB, 18 us at 4.3 TB/s) ~20 us, since a kernel this short
//                  spends about a tenth of its time starting and finishing its last wave
//   kernel16       written after lab 02's two-second loops at 65536 columns put QuACK ahead of
//                  kernel14 in both dtypes, with the board at its power limit and QuACK spending
//                  less energy per call: about a quarter fewer instructions per bf16 thread and
//                  two fifths fewer per fp32 one, for the same bytes (the offline SASS count is
//                  in kernel 16's comment). RMSNorm's rung 5 cut about a third of its warp
//                  instructions and gained in both the timed median and the loops (its page has
//                  the figures): ~1% in the median and ~2% in the loops here, enough to draw
//                  level with QuACK at 65536 and 131072 bf16 columns. At 8192 x 65536 fp32
//                  (256 KB rows, new to the register slice) level with kernel12 or a little
//                  ahead
//
// Special rows follow torch.softmax: a row holding NaN or +inf, or made only of -inf, gives NaN
// everywhere; -inf elements in an otherwise finite row give 0. Every dtype is loaded, converted
// to fp32, computed in fp32 and rounded once on the store.
// minikernel: max-registers 80 softmax_kernel14_ (by design: a 16-bit slice keeps p in 64 fp32
// registers per thread, three 256-thread blocks per SM; see kernel 14)
// minikernel: max-registers 80 softmax_kernel16_ (kernel 14's slices, with the same budget)
#include "cluster.cuh"
#include "common.cuh"

// --------------------------------------------------------------------------------------------
// Helpers shared by the rungs
// --------------------------------------------------------------------------------------------

// MK_NEG_INF (-inf as a float) comes from cluster.cuh.

// The dynamic shared memory of a launch, viewed as an array of U. One extern declaration for
// every kernel of the file (two declarations with different types would clash).
template <typename U> __device__ __forceinline__ U* dynamic_smem() {
    extern __shared__ __align__(16) unsigned char mk_dynamic_smem[];
    return reinterpret_cast<U*>(mk_dynamic_smem);
}

// __expf(x) is one MUFU.EX2 instruction on 2^(x * log2 e): a few ulp, and exactly what the
// special rows need: __expf(-inf) = 0, __expf(+inf) = +inf, __expf(NaN) = NaN. Every rung
// uses it, so that the ladder compares memory and reduction strategies, not exp implementations.

// fmaxf ignores a NaN operand; a NaN element still reaches the sum through __expf(NaN) = NaN,
// so its whole row comes out NaN, as in torch.

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;  // a + b == b + a exactly, so every lane ends with the same bits
}

// Block-wide reductions for blocks of 32 * k threads (k <= 32); every thread of the block must
// call them (they contain __syncthreads), and every thread gets the result. `scratch` holds at
// least 33 floats of shared memory. Calling two of them in a row with the same scratch is safe:
// a warp writes scratch[warp] of the second call only after the barrier that follows every
// thread's read of scratch[32] from the first.
__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : MK_NEG_INF;
        w = warp_max(w);
        if (lane == 0) scratch[32] = w;
    }
    __syncthreads();
    return scratch[32];
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.f;
        w = warp_sum(w);
        if (lane == 0) scratch[32] = w;
    }
    __syncthreads();
    return scratch[32];
}

// --- the online normalizer --------------------------------------------------------------------
// (m, s) summarises a set of elements: m its max, s = sum of exp(x - m). Two summaries merge
// into one by rescaling both sums to the larger max. When both maxima are -inf (nothing seen yet,
// or only -inf), the shift is 0 instead of -inf so that -inf - (-inf) never makes a NaN; the sums
// are 0 then, and stay 0. A +inf max gives +inf - +inf = NaN, which is torch's answer for that row.
struct MaxSum {
    float m;
    float s;
};

__device__ __forceinline__ float safe_shift(float m) { return m == MK_NEG_INF ? 0.f : m; }

__device__ __forceinline__ MaxSum ms_merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    const float shift = safe_shift(m);
    // Symmetric in a and b, bit for bit, so that a butterfly leaves every lane the same result.
    // __fmul_rn keeps the compiler from fusing one product into the addition (an FMA would
    // round a.s * ea and b.s * eb differently depending on which side is `a`).
    return {m, __fmul_rn(a.s, __expf(a.m - shift)) + __fmul_rn(b.s, __expf(b.m - shift))};
}

// One element into a running summary: the recurrence of Milakov & Gimelshein,
//   m_j = max(m_{j-1}, x_j),   s_j = s_{j-1} * exp(m_{j-1} - m_j) + exp(x_j - m_j).
__device__ __forceinline__ MaxSum ms_add(MaxSum t, float x) {
    const float m = fmaxf(t.m, x);
    const float shift = safe_shift(m);
    return {m, t.s * __expf(t.m - shift) + __expf(x - shift)};
}

// A 16-byte vector into a running summary: one rescale per vector instead of one per element.
template <typename T> __device__ __forceinline__ MaxSum ms_add_vec(MaxSum t, const Vec<T>& v) {
    float vm = MK_NEG_INF;
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) vm = fmaxf(vm, to_float(v.v[k]));
    const float m = fmaxf(t.m, vm);
    const float shift = safe_shift(m);
    float s = t.s * __expf(t.m - shift);
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) s += __expf(to_float(v.v[k]) - shift);
    return {m, s};
}

__device__ __forceinline__ MaxSum warp_ms(MaxSum t) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const MaxSum o = {__shfl_xor_sync(0xffffffffu, t.m, offset),
                          __shfl_xor_sync(0xffffffffu, t.s, offset)};
        t = ms_merge(t, o);
    }
    return t;
}

// Same contract as block_max; `scratch` holds at least 66 floats.
__device__ __forceinline__ MaxSum block_ms(MaxSum t, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    t = warp_ms(t);
    if (lane == 0) {
        scratch[warp] = t.m;
        scratch[33 + warp] = t.s;
    }
    __syncthreads();
    if (warp == 0) {
        const bool live = lane < static_cast<int>(blockDim.x >> 5);
        MaxSum w = {live ? scratch[lane] : MK_NEG_INF, live ? scratch[33 + lane] : 0.f};
        w = warp_ms(w);
        if (lane == 0) {
            scratch[32] = w.m;
            scratch[65] = w.s;
        }
    }
    __syncthreads();
    return {scratch[32], scratch[65]};
}

// RowSplit, split_row and edge_index (a row's unaligned head, 16-byte body and tail) are in
// cluster.cuh, shared with the other row ops.

template <typename T> __device__ __forceinline__ Vec<T> neg_inf_vec() {
    Vec<T> v;
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) v.v[k] = from_float<T>(MK_NEG_INF);
    return v;
}

// y = exp(x - m) * inv for each element of a vector, rounded once to T.
template <typename T>
__device__ __forceinline__ Vec<T> normalize_vec(Vec<T> v, float m, float inv) {
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) v.v[k] = from_float<T>(__expf(to_float(v.v[k]) - m) * inv);
    return v;
}

// --8<-- [start:exp]
// e^d two ways. __expf(d) is ex2.approx.f32(d * log2 e), and since this file is compiled
// without -ftz (flush-to-zero), the compiler wraps that MUFU.EX2 in a compare and two
// predicated multiplies that keep results below 2^-126 (fp32's smallest normal number) exact
// as subnormals: four instructions per exponential besides the multiply. Rung 13 asks for
// ex2.approx.ftz.f32, which flushes those results to zero instead, and is one multiply and
// one MUFU.EX2. A softmax output that small is below 1.2e-38 times the row's largest one: in
// fp32 it becomes 0 instead of a subnormal, and in 16-bit outputs it was 0 already.
template <bool FAST>
__device__ __forceinline__ float mk_exp(float d) {
    if constexpr (FAST) {
        float r;
        asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d * 1.4426950408889634f));
        return r;
    } else {
        return __expf(d);
    }
}

// x[k] of a vector as fp32. For bf16 an element is the top half of an fp32, so the generic
// to_float(v.v[k]) shifts it up; for an odd k the compiler first moves the high half of the
// 32-bit word down (a PRMT) and then shifts it back up (IMAD.U32): two instructions where one
// LOP3 that clears the word's low half gives the same float. Rung 13 reads elements this way.
// 2^d and 1/s as the single MUFU instructions, flushing subnormals (rungs 15 and 16).
__device__ __forceinline__ float mk_ex2(float d) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
    return r;
}

__device__ __forceinline__ float mk_rcp(float s) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
    return r;
}

// The shift folded into the exponent (rungs 15 and 16): e^(x - m) = 2^(x log2 e - m log2 e) is
// one FFMA, fmaf(x, log2 e, -ms), and one MUFU.EX2, where ms = m log2 e is computed once. But ms
// is rounded: what the rounding dropped, eta = m log2 e - ms (exactly fmaf(m, log2 e, -ms)),
// multiplies every such exponential by 2^eta, and |eta| grows with |m| (up to 2^-24 |ms|: about
// 18 at m = 1e9, 6e4 at m = 1e12, where 2^eta overflows). So the fold is taken only for
// |m| <= MK_FOLD_MAX, where |eta| <= 2^-8; larger and non-finite maxima subtract first. Where
// one shift serves a whole row (rung 15), 2^eta cancels in p / s; where each thread has its own
// (rung 16), the thread divides it back out of its sum and its scale.
constexpr float MK_LOG2E = 1.4426950408889634f;
constexpr float MK_FOLD_MAX = 65536.f;
__device__ __forceinline__ bool foldable(float m) { return fabsf(m) <= MK_FOLD_MAX; }

template <typename T> __device__ __forceinline__ float lean_elem(const Vec<T>& v, int k) {
    return to_float(v.v[k]);
}
__device__ __forceinline__ float lean_elem(const Vec<mk_bf16>& v, int k) {
    const unsigned w = reinterpret_cast<const unsigned*>(&v)[k >> 1];
    return __uint_as_float((k & 1) ? (w & 0xffff0000u) : (w << 16));
}
template <bool LEAN, typename T> __device__ __forceinline__ float elem(const Vec<T>& v, int k) {
    if constexpr (LEAN) {
        return lean_elem(v, k);
    } else {
        return to_float(v.v[k]);
    }
}
// --8<-- [end:exp]

template <typename T, bool LEAN>
__device__ __forceinline__ Vec<T> normalize_vec_lean(const Vec<T>& v, float m, float inv) {
    Vec<T> o;
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) o.v[k] = from_float<T>(mk_exp<LEAN>(elem<LEAN>(v, k) - m) * inv);
    return o;
}

// --------------------------------------------------------------------------------------------
// GPU kernels
// --------------------------------------------------------------------------------------------

// --8<-- [start:kernel1]
// One thread per row. A warp's load instruction touches 32 rows N elements apart: 32 separate
// memory transactions for 32 useful elements, and every row is read three times.
template <typename T>
__device__ __forceinline__ void softmax1(const T* x, T* y, long long M, long long N) {
    const long long row = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const T* xr = x + row * N;  // 64-bit: row * N passes 2^31 on large inputs
    T* yr = y + row * N;
    float m = MK_NEG_INF;
    for (long long j = 0; j < N; ++j) m = fmaxf(m, to_float(xr[j]));  // pass 1: max
    float s = 0.f;
    for (long long j = 0; j < N; ++j) s += __expf(to_float(xr[j]) - m);  // pass 2: sum
    const float inv = 1.f / s;
    for (long long j = 0; j < N; ++j) yr[j] = from_float<T>(__expf(to_float(xr[j]) - m) * inv);
}

#define SOFTMAX1(SUFFIX, T)                                                                  \
    extern "C" __global__ void softmax_kernel1_##SUFFIX(const T* x, T* y, long long M,       \
                                                       long long N) {                        \
        softmax1<T>(x, y, M, N);                                                             \
    }
MK_FOR_EACH_DTYPE(SOFTMAX1)
// --8<-- [end:kernel1]

// --8<-- [start:kernel2]
// One block per row (any multiple of 32 threads). Consecutive threads load consecutive elements:
// one 128-byte transaction per warp instead of 32. The row is staged once in shared memory as
// fp32 (dynamic size N * 4 bytes, so N is bounded by the shared memory of a block), and thread 0
// walks it twice while the others wait at the barrier.
template <typename T> __device__ __forceinline__ void softmax2(const T* x, T* y, long long N) {
    float* row_s = dynamic_smem<float>();
    __shared__ float stats[2];
    const int n = static_cast<int>(N);  // the host guarantees N * 4 bytes fit in shared memory
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    for (int j = threadIdx.x; j < n; j += blockDim.x) row_s[j] = to_float(xr[j]);
    __syncthreads();  // thread 0 is about to read what every other thread wrote
    if (threadIdx.x == 0) {
        float m = MK_NEG_INF;
        for (int j = 0; j < n; ++j) m = fmaxf(m, row_s[j]);
        float s = 0.f;
        for (int j = 0; j < n; ++j) s += __expf(row_s[j] - m);
        stats[0] = m;
        stats[1] = 1.f / s;
    }
    __syncthreads();  // everyone waits for thread 0's two numbers
    const float m = stats[0], inv = stats[1];
    for (int j = threadIdx.x; j < n; j += blockDim.x) yr[j] = from_float<T>(__expf(row_s[j] - m) * inv);
}

#define SOFTMAX2(SUFFIX, T)                                                                  \
    extern "C" __global__ void softmax_kernel2_##SUFFIX(const T* x, T* y, long long N) {     \
        softmax2<T>(x, y, N);                                                                \
    }
MK_FOR_EACH_DTYPE(SOFTMAX2)
// --8<-- [end:kernel2]

// --8<-- [start:kernel3]
// Same staging, but the block reduces in parallel: each thread folds its own strided elements,
// a warp folds 32 values with 5 shuffles, and warp 0 folds the per-warp results. log2 steps
// instead of N serial ones. Each thread only re-reads the shared-memory elements it wrote itself,
// so the barriers inside block_max / block_sum are the only ones needed.
template <typename T> __device__ __forceinline__ void softmax3(const T* x, T* y, long long N) {
    float* row_s = dynamic_smem<float>();
    __shared__ float scratch[33];
    const int n = static_cast<int>(N);
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    float m = MK_NEG_INF;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = to_float(xr[j]);
        row_s[j] = v;
        m = fmaxf(m, v);
    }
    m = block_max(m, scratch);
    float s = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += __expf(row_s[j] - m);
    s = block_sum(s, scratch);
    const float inv = 1.f / s;
    for (int j = threadIdx.x; j < n; j += blockDim.x) yr[j] = from_float<T>(__expf(row_s[j] - m) * inv);
}

#define SOFTMAX3(SUFFIX, T)                                                                  \
    extern "C" __global__ void softmax_kernel3_##SUFFIX(const T* x, T* y, long long N) {     \
        softmax3<T>(x, y, N);                                                                \
    }
MK_FOR_EACH_DTYPE(SOFTMAX3)
// --8<-- [end:kernel3]

// --8<-- [start:kernel4]
// Online softmax: while loading, each thread keeps (max, sum of exp) of what it has seen so far,
// rescaling the sum whenever the max grows. One sweep and ONE block reduction (of pairs) replace
// the max sweep, the sum sweep and their two reductions.
template <typename T> __device__ __forceinline__ void softmax4(const T* x, T* y, long long N) {
    float* row_s = dynamic_smem<float>();
    __shared__ float scratch[66];
    const int n = static_cast<int>(N);
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    MaxSum t = {MK_NEG_INF, 0.f};
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = to_float(xr[j]);
        row_s[j] = v;
        t = ms_add(t, v);
    }
    t = block_ms(t, scratch);
    const float inv = 1.f / t.s;
    for (int j = threadIdx.x; j < n; j += blockDim.x) yr[j] = from_float<T>(__expf(row_s[j] - t.m) * inv);
}

#define SOFTMAX4(SUFFIX, T)                                                                  \
    extern "C" __global__ void softmax_kernel4_##SUFFIX(const T* x, T* y, long long N) {     \
        softmax4<T>(x, y, N);                                                                \
    }
MK_FOR_EACH_DTYPE(SOFTMAX4)
// --8<-- [end:kernel4]

// --8<-- [start:kernel5]
// 16-byte vectors: one LDG.128 moves 4 floats or 8 halves, so a warp asks for 512 contiguous
// bytes per instruction. Shared memory holds the aligned body of the row as it came (its own
// dtype: half the bytes of kernel4's fp32 copy for 16-bit inputs); the < 2 * VN edge elements
// stay in the registers of the first threads.
template <typename T> __device__ __forceinline__ void softmax5(const T* x, T* y, long long N) {
    constexpr int VN = Vec<T>::N;
    Vec<T>* row_s = dynamic_smem<Vec<T>>();  // nvec vectors: at most N / VN of them
    __shared__ float scratch[66];
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const RowSplit sp = split_row(xr, N);
    const int nvec = static_cast<int>(sp.nvec);
    const T* xb = xr + sp.head;  // 16-byte aligned
    T* yb = yr + sp.head;
    MaxSum t = {MK_NEG_INF, 0.f};
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        const Vec<T> v = load_vec(xb + static_cast<long long>(i) * VN);
        row_s[i] = v;
        t = ms_add_vec(t, v);
    }
    const int n_edge = sp.head + sp.tail;  // < 2 * VN <= 16 <= blockDim.x
    long long e_idx = 0;
    float e = MK_NEG_INF;
    if (static_cast<int>(threadIdx.x) < n_edge) {
        e_idx = edge_index(sp, threadIdx.x, VN);
        e = to_float(xr[e_idx]);
        t = ms_add(t, e);
    }
    t = block_ms(t, scratch);
    const float inv = 1.f / t.s;
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        store_vec(yb + static_cast<long long>(i) * VN, normalize_vec(row_s[i], t.m, inv));
    }
    if (static_cast<int>(threadIdx.x) < n_edge) yr[e_idx] = from_float<T>(__expf(e - t.m) * inv);
}

#define SOFTMAX5(SUFFIX, T)                                                                  \
    extern "C" __global__ void softmax_kernel5_##SUFFIX(const T* x, T* y, long long N) {     \
        softmax5<T>(x, y, N);                                                                \
    }
MK_FOR_EACH_DTYPE(SOFTMAX5)
// --8<-- [end:kernel5]

// --8<-- [start:kernel6]
// The row in registers. Each thread owns 32 elements, as VPT 16-byte vectors (VPT = 8 for fp32,
// 4 for 16-bit dtypes), converted to fp32 once on arrival: vector i = j * STRIDE + tid is
// coalesced across the block, and since VPT is a compile-time constant the array is registers,
// not memory. All VPT loads are issued before the first one is used (VPT * 16 bytes in flight
// per thread); max and sum are then two cheap passes over registers with one exp per element,
// and only the final (max, sum) pair crosses threads, in one block reduction. Rows up to
// THREADS * 32 elements. Indices are 32-bit: the host sends rows shorter than 2^31 here.
template <typename T, int VPT, int STRIDE, bool STREAM = true, bool LEAN = false>
__device__ __forceinline__ void load_chunk(float (&f)[VPT][Vec<T>::N], const T* xb, int first,
                                           int nvec, int tid) {
    constexpr int VN = Vec<T>::N;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        const int i = first + j * STRIDE + tid;
        if (i < nvec) {
            const T* src = xb + static_cast<long long>(i) * VN;
            const Vec<T> r = STREAM ? load_vec(src) : load_vec_plain(src);
#pragma unroll
            for (int k = 0; k < VN; ++k) f[j][k] = elem<LEAN>(r, k);
        } else {
#pragma unroll
            for (int k = 0; k < VN; ++k) f[j][k] = MK_NEG_INF;  // adds exp(-inf) = 0 to the sum
        }
    }
}

// (max, sum of exp) of a thread's registers plus its edge element `e` (-inf when it has none).
template <int VPT, int VN> __device__ __forceinline__ MaxSum chunk_ms(const float (&f)[VPT][VN], float e) {
    float m = e;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
#pragma unroll
        for (int k = 0; k < VN; ++k) m = fmaxf(m, f[j][k]);
    }
    const float shift = safe_shift(m);
    float s = __expf(e - shift);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
#pragma unroll
        for (int k = 0; k < VN; ++k) s += __expf(f[j][k] - shift);
    }
    return {m, s};
}

template <typename T, int VPT, int STRIDE>
__device__ __forceinline__ void store_chunk(const float (&f)[VPT][Vec<T>::N], T* yb, int first,
                                            int nvec, int tid, float m, float inv) {
    constexpr int VN = Vec<T>::N;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        const int i = first + j * STRIDE + tid;
        if (i < nvec) {
            Vec<T> r;
#pragma unroll
            for (int k = 0; k < VN; ++k) r.v[k] = from_float<T>(__expf(f[j][k] - m) * inv);
            store_vec(yb + static_cast<long long>(i) * VN, r);
        }
    }
}

template <typename T, int THREADS>
__device__ __forceinline__ void softmax6(const T* x, T* y, long long N) {
    constexpr int VN = Vec<T>::N;
    constexpr int VPT = 32 / VN;
    __shared__ float scratch[66];
    const int tid = threadIdx.x;
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const RowSplit sp = split_row(xr, N);
    const int nvec = static_cast<int>(sp.nvec);
    float f[VPT][VN];
    load_chunk<T, VPT, THREADS>(f, xr + sp.head, 0, nvec, tid);
    const int n_edge = sp.head + sp.tail;  // < 16 <= THREADS
    long long e_idx = 0;
    float e = MK_NEG_INF;
    if (tid < n_edge) {
        e_idx = edge_index(sp, tid, VN);
        e = to_float(xr[e_idx]);
    }
    const MaxSum t = block_ms(chunk_ms(f, e), scratch);
    const float inv = 1.f / t.s;
    store_chunk<T, VPT, THREADS>(f, yr + sp.head, 0, nvec, tid, t.m, inv);
    if (tid < n_edge) yr[e_idx] = from_float<T>(__expf(e - t.m) * inv);
}

#define SOFTMAX6(SUFFIX, T, THREADS)                                                         \
    extern "C" __global__ void __launch_bounds__(THREADS)                                    \
        softmax_kernel6_t##THREADS##_##SUFFIX(const T* x, T* y, long long N) {               \
        softmax6<T, THREADS>(x, y, N);                                                       \
    }
#define SOFTMAX6_SIZES(SUFFIX, T)                                                            \
    SOFTMAX6(SUFFIX, T, 64)                                                                  \
    SOFTMAX6(SUFFIX, T, 128)                                                                 \
    SOFTMAX6(SUFFIX, T, 256)                                                                 \
    SOFTMAX6(SUFFIX, T, 512)                                                                 \
    SOFTMAX6(SUFFIX, T, 1024)
MK_FOR_EACH_DTYPE(SOFTMAX6_SIZES)
// --8<-- [end:kernel6]

// --8<-- [start:kernel7]
// Short rows (up to 32 lanes * 32 elements = 1024): a whole block per row would leave most of
// its threads idle and pay two barriers for a few hundred elements. Here one warp owns one row, a
// block holds four rows, and every reduction is five shuffles inside the warp. VPT vectors per
// lane, the smallest that covers the row (the host picks it). A warp whose row is past the end
// leaves at once: nothing below waits for it.
template <typename T, int VPT>
__device__ __forceinline__ void softmax7(const T* x, T* y, long long M, long long N) {
    constexpr int VN = Vec<T>::N;
    constexpr int ROWS_PER_BLOCK = 4;
    const int lane = threadIdx.x & 31;
    const long long row = static_cast<long long>(blockIdx.x) * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= M) return;  // the whole warp together, so the shuffles below have all 32 lanes
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const RowSplit sp = split_row(xr, N);
    const int nvec = static_cast<int>(sp.nvec);
    float f[VPT][VN];
    load_chunk<T, VPT, 32>(f, xr + sp.head, 0, nvec, lane);
    const int n_edge = sp.head + sp.tail;  // < 16 <= 32 lanes
    long long e_idx = 0;
    float e = MK_NEG_INF;
    if (lane < n_edge) {
        e_idx = edge_index(sp, lane, VN);
        e = to_float(xr[e_idx]);
    }
    const MaxSum t = warp_ms(chunk_ms(f, e));
    const float inv = 1.f / t.s;
    store_chunk<T, VPT, 32>(f, yr + sp.head, 0, nvec, lane, t.m, inv);
    if (lane < n_edge) yr[e_idx] = from_float<T>(__expf(e - t.m) * inv);
}

#define SOFTMAX7(SUFFIX, T, VPT)                                                             \
    extern "C" __global__ void __launch_bounds__(128)                                        \
        softmax_kernel7_v##VPT##_##SUFFIX(const T* x, T* y, long long M, long long N) {      \
        softmax7<T, VPT>(x, y, M, N);                                                        \
    }
// VPT vectors of 16 bytes per lane: up to 32 elements per lane for every dtype.
#define SOFTMAX7_SIZES_32BIT(SUFFIX, T)                                                      \
    SOFTMAX7(SUFFIX, T, 1) SOFTMAX7(SUFFIX, T, 2) SOFTMAX7(SUFFIX, T, 4) SOFTMAX7(SUFFIX, T, 8)
#define SOFTMAX7_SIZES_16BIT(SUFFIX, T)                                                      \
    SOFTMAX7(SUFFIX, T, 1) SOFTMAX7(SUFFIX, T, 2) SOFTMAX7(SUFFIX, T, 4)
SOFTMAX7_SIZES_32BIT(f32, float)
SOFTMAX7_SIZES_16BIT(f16, mk_half)
SOFTMAX7_SIZES_16BIT(bf16, mk_bf16)
// --8<-- [end:kernel7]

// --8<-- [start:kernel8]
// Rows of any length. Pass 1 walks the row forward UNROLL vectors per thread at a time, folding
// each vector into the thread's online (max, sum); one block reduction; pass 2 walks the row
// BACKWARDS, normalising and storing. Pass 2 reads x a second time, but the chunks it reads first
// are the ones pass 1 read last, so they are the likeliest to still be in L2; pass 1 asks L2 to
// keep its lines (evict_last), pass 2's loads mark them evict_first again. DRAM traffic
// is 2 * M * N * sizeof(T) while a row times the rows in flight fits in L2, and creeps towards
// 3 * M * N * sizeof(T) beyond that.
// An L2 cache policy (sm_80+) is a 64-bit value made by createpolicy; a load that carries it
// sets the priority of the lines it touches.
__device__ __forceinline__ unsigned long long l2_policy_evict_last() {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

__device__ __forceinline__ unsigned long long l2_policy_evict_first() {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

template <typename T>
__device__ __forceinline__ Vec<T> load_vec_hint(const T* p, unsigned long long policy) {
    uint4 r;
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p), "l"(policy));
    return *reinterpret_cast<Vec<T>*>(&r);
}

template <typename T, int THREADS>
__device__ __forceinline__ void softmax8(const T* x, T* y, long long N) {
    constexpr int VN = Vec<T>::N;
    constexpr int UNROLL = 4;  // vectors in flight per thread per step
    constexpr long long STEP = static_cast<long long>(UNROLL) * THREADS;
    __shared__ float scratch[66];
    const int tid = threadIdx.x;
    const long long row = blockIdx.x;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const RowSplit sp = split_row(xr, N);
    const T* xb = xr + sp.head;
    T* yb = yr + sp.head;
    const unsigned long long keep = l2_policy_evict_last(), drop = l2_policy_evict_first();

    MaxSum t = {MK_NEG_INF, 0.f};
    for (long long base = 0; base < sp.nvec; base += STEP) {  // pass 1, forward
        Vec<T> v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long i = base + static_cast<long long>(u) * THREADS + tid;
            v[u] = i < sp.nvec ? load_vec_hint(xb + i * VN, keep) : neg_inf_vec<T>();
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) t = ms_add_vec(t, v[u]);
    }
    const int n_edge = sp.head + sp.tail;
    long long e_idx;
    const float e = edge_value(xr, sp, tid, n_edge, e_idx);
    if (tid < n_edge) t = ms_add(t, e);
    t = block_ms(t, scratch);
    const float inv = 1.f / t.s;

    const long long steps = (sp.nvec + STEP - 1) / STEP;
    for (long long k = steps - 1; k >= 0; --k) {  // pass 2, backward
        const long long base = k * STEP;
        Vec<T> v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long i = base + static_cast<long long>(u) * THREADS + tid;
            if (i < sp.nvec) v[u] = load_vec_hint(xb + i * VN, drop);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long i = base + static_cast<long long>(u) * THREADS + tid;
            if (i < sp.nvec) store_vec(yb + i * VN, normalize_vec(v[u], t.m, inv));
        }
    }
    if (tid < n_edge) yr[e_idx] = from_float<T>(__expf(e - t.m) * inv);
}

#define SOFTMAX8(SUFFIX, T)                                                                  \
    extern "C" __global__ void __launch_bounds__(512)                                        \
        softmax_kernel8_##SUFFIX(const T* x, T* y, long long N) {                            \
        softmax8<T, 512>(x, y, N);                                                           \
    }
MK_FOR_EACH_DTYPE(SOFTMAX8)
// --8<-- [end:kernel8]

// --8<-- [start:kernel9]
// Long rows, read once. A thread-block cluster (sm_90+: up to 8 blocks scheduled together on
// one GPC, able to read each other's shared memory) shares one row: block `rank` holds vectors
// [rank * THREADS * VPT, (rank + 1) * THREADS * VPT) of it in registers exactly as in kernel6,
// reduces them to one (max, sum), and publishes that pair in its shared memory. After a cluster
// barrier every block reads the CLUSTER pairs over DSMEM (mapa + ld.shared::cluster), merges them
// in the same order (so every block gets the same bits) and writes its part of the row. A second
// barrier keeps each block's shared memory alive until the others have read it.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

// cluster_rank, ld_dsmem and the cluster barrier are in cluster.cuh.

template <typename T, int THREADS, int CLUSTER>
__device__ __forceinline__ void softmax9(const T* x, T* y, long long N) {
    constexpr int VN = Vec<T>::N;
    constexpr int VPT = 32 / VN;
    __shared__ float scratch[66];
    __shared__ float partial[2];  // this block's (max, sum), read by the whole cluster
    const int tid = threadIdx.x;
    const unsigned rank = cluster_rank();  // == blockIdx.x % CLUSTER for a 1-D cluster
    const long long row = blockIdx.x / CLUSTER;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const RowSplit sp = split_row(xr, N);
    const int nvec = static_cast<int>(sp.nvec);
    const int first = static_cast<int>(rank) * THREADS * VPT;  // first vector of this block
    float f[VPT][VN];
    load_chunk<T, VPT, THREADS>(f, xr + sp.head, first, nvec, tid);
    const int n_edge = rank == 0 ? sp.head + sp.tail : 0;  // block 0 also takes the edges
    long long e_idx = 0;
    float e = MK_NEG_INF;
    if (tid < n_edge) {
        e_idx = edge_index(sp, tid, VN);
        e = to_float(xr[e_idx]);
    }
    const MaxSum b = block_ms(chunk_ms(f, e), scratch);
    if (tid == 0) {
        partial[0] = b.m;
        partial[1] = b.s;
    }
    // Every block's pair written (release) and visible to every block (acquire).
    cluster_sync();
    MaxSum t = {MK_NEG_INF, 0.f};
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
        t = ms_merge(t, {ld_dsmem(&partial[0], r), ld_dsmem(&partial[1], r)});
    }
    // Done reading the others' shared memory: release orders those reads before the arrival.
    cluster_arrive();
    const float inv = 1.f / t.s;
    store_chunk<T, VPT, THREADS>(f, yr + sp.head, first, nvec, tid, t.m, inv);
    if (tid < n_edge) yr[e_idx] = from_float<T>(__expf(e - t.m) * inv);
    cluster_wait();  // leave only when all did
}

#define SOFTMAX9(SUFFIX, T, THREADS, CLUSTER)                                                \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)    \
        softmax_kernel9_t##THREADS##_c##CLUSTER##_##SUFFIX(const T* x, T* y, long long N) {  \
        softmax9<T, THREADS, CLUSTER>(x, y, N);                                              \
    }
#define SOFTMAX9_SIZES(SUFFIX, T)                                                            \
    SOFTMAX9(SUFFIX, T, 512, 2)                                                              \
    SOFTMAX9(SUFFIX, T, 512, 4)                                                              \
    SOFTMAX9(SUFFIX, T, 512, 8)                                                              \
    SOFTMAX9(SUFFIX, T, 1024, 8)
MK_FOR_EACH_DTYPE(SOFTMAX9_SIZES)

#endif  // __CUDA_ARCH__ >= 900
// --8<-- [end:kernel9]

// --8<-- [start:prefetch]
// Rung 12's hint: ask L2 to fetch `bytes` from p (a slice, 16-byte aligned) in 128-byte lines,
// spread over the block's threads. prefetch.global.L2 only moves data into L2: it loads nothing
// into registers, waits for nothing, and evict_last asks L2 to keep the lines over data marked
// normal (the rows being read) and evict_first (the rows being written, see store_vec).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
template <int THREADS>
__device__ __forceinline__ void prefetch_l2(const void* p, int bytes) {
    const char* c = static_cast<const char*>(p);
    for (int o = threadIdx.x * 128; o < bytes; o += THREADS * 128) {
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(c + o));
    }
}
#endif
// --8<-- [end:prefetch]

// --8<-- [start:kernel10]
// Rung 9 kept a cluster's slice of the row in registers: 1024 threads x 32 values per block, one
// block per SM, so each SM had nothing to load while its block sat at a barrier or stored. Rung
// 10 stages the slice in shared memory instead (at most ~64 KB, set by the host in slices.py,
// so three blocks share an SM and overlap their phases). Per row:
//   1. each block copies its slice into shared memory with cp.async (all of it in flight at
//      once, see cluster.cuh), then each thread takes the max m_t of its own vectors;
//   2. each thread computes p = exp(x - m_t) for its vectors, adds them up, and (when the row
//      spans a cluster) writes p back over x in shared memory, rounded to T like the output
//      will be; then one (max, sum) per warp, pushed to every block of the cluster and merged
//      there in the same order (ClusterExchange, cluster.cuh: no block or cluster barrier);
//   3. each thread writes y = p * exp(m_t - m) / s: one multiply per element, no second exp
//      (a one-block row computes y = exp(x - m) / s from x again instead).
// Why keep p rather than recompute it: an exp is a MUFU op, and an H200 SM does 16 of those per
// clock. Its share of the DRAM ceiling is ~4.3 TB/s / 132 SMs / ~1.9 GHz = ~17 bytes per clock,
// which is ~4 bf16 elements per clock once each is read (2 bytes) and written (2 bytes). Two
// exps per element would take half of the MUFU's clocks, with the conversions, adds and shared
// memory traffic of the three passes competing for the same issue slots; one exp takes a
// quarter. The price is one more rounding: p is stored in T and y = p * f is rounded again (for
// bf16, at most about one unit in the last place more than rounding exp(x - m) / s once).
// Rows that fit one block keep recomputing instead: with no cluster barrier to wait at, the
// three to seven blocks on an SM keep its MUFU and DRAM busy between them, and a probe on the
// H200 measured the extra shared-memory store slower there than the second exp, while the
// cluster rows, whose blocks idle at the cluster barrier, gained from it.
// Rows short enough for one block (CLUSTER = 1) skip the cluster steps: the same kernel is the
// shared-memory rung for mid-length rows. The slice of block `rank` is vectors
// [rank * per_block, (rank + 1) * per_block) of the row's aligned body; block 0 also takes the
// scalar edges.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The row's (max, sum) over a cluster: each warp's pair, reduced with shuffles, goes to every
// block of the cluster (cluster.cuh's exchange), and each block folds all of them in the same
// order, so every block ends with the same bits. Rungs 10, 12, 13 and 14 call it.
template <int WARPS, int CLUSTER>
__device__ __forceinline__ MaxSum cluster_ms(ClusterExchange<2, WARPS, CLUSTER>& xch, MaxSum mine) {
    const MaxSum t = warp_ms(mine);
    exchange_push(xch, {t.m, t.s});
    float acc[2] = {MK_NEG_INF, 0.f};
    exchange_fold(xch, acc, [](float (&a)[2], const float (&b)[2]) {
        const MaxSum r = ms_merge({a[0], a[1]}, {b[0], b[1]});
        a[0] = r.m;
        a[1] = r.s;
    });
    return {acc[0], acc[1]};
}

// The same (max, sum) for rung 16, max first. ms_merge rescales both sides at every step of a
// butterfly: two exponentials, each with __expf's subnormal fix-up, about nineteen instructions
// a step and ten steps per thread in cluster_ms. Here a butterfly of FMNMX finds the max M, each
// lane rescales its own sum once, s e^(m - M), and a butterfly of FADD adds the results: about
// thirty instructions for a warp's five steps. Both butterflies are symmetric, so every lane
// ends with the same bits, and every block folds the same slots in the same order. A -inf m
// contributes s e^(-inf) = 0 (its s is 0, or NaN from a NaN element, which stays NaN); an
// m of +inf gives e^(inf - inf) = NaN, as in cluster_ms.
__device__ __forceinline__ MaxSum warp_ms_maxfirst(MaxSum t) {
    const float m = warp_max(t.m);
    return {m, warp_sum(t.s * mk_exp<true>(t.m - safe_shift(m)))};
}

template <int WARPS, int CLUSTER>
__device__ __forceinline__ MaxSum cluster_ms_maxfirst(ClusterExchange<2, WARPS, CLUSTER>& xch,
                                                      MaxSum mine) {
    const MaxSum t = warp_ms_maxfirst(mine);
    exchange_push(xch, {t.m, t.s});
    constexpr int SLOTS = WARPS * CLUSTER;
    const int lane = threadIdx.x & 31;
    float m = MK_NEG_INF, s = 0.f;
#pragma unroll
    for (int k = lane; k < SLOTS; k += 32) m = fmaxf(m, xch.slot[0][k]);  // slots l, l + 32, ...
    m = warp_max(m);
#pragma unroll  // read the slots again rather than hold them (fewer live registers: no spill)
    for (int k = lane; k < SLOTS; k += 32) s += xch.slot[1][k] * mk_exp<true>(xch.slot[0][k] - safe_shift(m));
    return {m, warp_sum(s)};
}

template <typename T, int THREADS, int CLUSTER, bool PREFETCH = false, bool LEAN = false>
__device__ __forceinline__ void softmax10(const T* x, T* y, long long N, int per_block,
                                          long long M = 0, int ahead = 0) {
    constexpr int VN = Vec<T>::N;
    __shared__ float scratch[66];
    __shared__ ClusterExchange<2, THREADS / 32, CLUSTER> xch;
    Vec<T>* slice = dynamic_smem<Vec<T>>();
    const int tid = threadIdx.x;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    if (CLUSTER > 1) exchange_open(xch);  // before the loads: the barrier's wait comes later
    const long long row = blockIdx.x / CLUSTER;
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const RowSplit sp = split_row(xr, N);
    const Slice s = slice_of(static_cast<int>(sp.nvec), per_block, rank);
    const T* xb = xr + sp.head + static_cast<long long>(s.first) * VN;
    T* yb = yr + sp.head + static_cast<long long>(s.first) * VN;

    // 1. stage the slice, folding a running max
    float m = MK_NEG_INF;
    stage_vectors<T, THREADS>(xb, slice, s.count, [&](const Vec<T>& v) {
#pragma unroll
        for (int k = 0; k < VN; ++k) m = fmaxf(m, elem<LEAN>(v, k));
    });
    if (PREFETCH && row + ahead < M) prefetch_l2<THREADS>(xb + ahead * N, s.count * 16);
    const int n_edge = rank == 0 ? sp.head + sp.tail : 0;  // block 0 also takes the edges
    long long e_idx;
    const float e = edge_value(xr, sp, tid, n_edge, e_idx);
    m = fmaxf(m, e);
    // 2. p = exp(x - m_t) over this thread's vectors, summed and (cluster rows) kept in place
    // of x; then the block's and the cluster's (max, sum)
    constexpr bool KEEP_P = CLUSTER > 1;
    const float shift = safe_shift(m);
    float sum = mk_exp<LEAN>(e - shift);
    for (int i = tid; i < s.count; i += THREADS) {
        const Vec<T> v = slice[i];
        Vec<T> o;  // a separate vector: writing p over v would tie each pair's halves together
#pragma unroll
        for (int k = 0; k < VN; ++k) {
            const float p = mk_exp<LEAN>(elem<LEAN>(v, k) - shift);
            sum += p;
            if (KEEP_P) o.v[k] = from_float<T>(p);
        }
        if (KEEP_P) slice[i] = o;  // read back in step 3 by this same thread: no barrier needed
    }
    MaxSum t;
    if (CLUSTER > 1) {  // each warp's pair goes to every block of the cluster (cluster.cuh)
        t = cluster_ms(xch, {m, sum});
    } else {
        t = block_ms({m, sum}, scratch);
    }
    // 3. y = p * exp(m_t - m) / s, written once. A thread whose elements are all -inf has
    // m_t = -inf and p = 0: its factor is 0 (not exp(0 - m), which overflows for m < -88); when
    // the whole row is -inf, s = 0 and 0 * (1 / 0) = NaN, torch's answer for that row.
    const float inv = 1.f / t.s;
    const float f = (m == MK_NEG_INF ? 0.f : mk_exp<LEAN>(m - t.m)) * inv;
    for (int i = tid; i < s.count; i += THREADS) {
        const Vec<T> v = slice[i];
        Vec<T> o;
        if (KEEP_P) {
#pragma unroll
            for (int k = 0; k < VN; ++k) o.v[k] = from_float<T>(elem<LEAN>(v, k) * f);
        } else {
            o = normalize_vec_lean<T, LEAN>(v, t.m, inv);
        }
        store_vec(yb + static_cast<long long>(i) * VN, o);
    }
    if (tid < n_edge) yr[e_idx] = from_float<T>(mk_exp<LEAN>(e - t.m) * inv);
}

#define SOFTMAX10_CLUSTER(SUFFIX, T, THREADS, CLUSTER)                                       \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)    \
        softmax_kernel10_t##THREADS##_c##CLUSTER##_##SUFFIX(const T* x, T* y, long long N,   \
                                                             int per_block) {               \
        softmax10<T, THREADS, CLUSTER>(x, y, N, per_block);                                  \
    }
#define SOFTMAX10_SINGLE(SUFFIX, T, THREADS)                                                 \
    extern "C" __global__ void __launch_bounds__(THREADS)                                    \
        softmax_kernel10_t##THREADS##_c1_##SUFFIX(const T* x, T* y, long long N,             \
                                                  int per_block) {                           \
        softmax10<T, THREADS, 1>(x, y, N, per_block);                                        \
    }
// What the host launches (slices.py): a row of up to 64 KB in one block of 128, 256 or 512
// threads; longer rows in clusters of 2, 4 or 8 blocks of 256 or 512 threads.
#define SOFTMAX10_SIZES(SUFFIX, T) \
    SOFTMAX10_SINGLE(SUFFIX, T, 128) \
    SOFTMAX10_SINGLE(SUFFIX, T, 256) \
    SOFTMAX10_SINGLE(SUFFIX, T, 512) \
    SOFTMAX10_CLUSTER(SUFFIX, T, 256, 2) \
    SOFTMAX10_CLUSTER(SUFFIX, T, 512, 2) \
    SOFTMAX10_CLUSTER(SUFFIX, T, 256, 4) \
    SOFTMAX10_CLUSTER(SUFFIX, T, 256, 8) \
    SOFTMAX10_CLUSTER(SUFFIX, T, 512, 8)
MK_FOR_EACH_DTYPE(SOFTMAX10_SIZES)
#endif  // __CUDA_ARCH__ >= 900
// --8<-- [end:kernel10]

// --8<-- [start:kernel11]
// Rungs 6 and 7 hold the row in registers, and still compute each element's exponential twice:
// once in chunk_ms for the sum, once in store_chunk for the output. The ncu excerpt of lab 02
// shows rung 6 waiting for issue slots more than for memory, and an exponential is a MUFU
// instruction, 16 per clock per SM, next to a DRAM share of ~4 bf16 elements per clock (rung 10's
// comment): two per element take half of those clocks, one a quarter. Rung 11 keeps the first
// one. Each thread overwrites its registers with p = exp(x - m_t), m_t its own maximum, while it
// sums them; after the block (or warp) merge, which gives the row's (m, s), it writes
// y = p * f with f = exp(m_t - m) / s: one exponential per element and one per thread. p stays in
// fp32 (it is in registers), so the output is still rounded once. A thread that saw only -inf
// has m_t = -inf and p = 0; its factor is 0 (not exp(-inf - m)), and a row of only -inf still
// gets s = 0, f = 0 * inf = NaN, torch's answer. Two layouts, as in rungs 7 and 6: a warp per row
// for rows up to 32 lanes x 32 elements, a block per row above; rows of 16 KB and more go to
// rung 10, which already computes one exponential per element on rows that span a cluster.
// Cache hints: rung 11 loads its row with plain loads (load_vec_plain) and keeps the streaming
// .cs stores of the other rungs. A probe on the H200 (outside the lab) timed this kernel with
// each of the four combinations of .cs and plain loads and stores, from 600 to 4097 columns in
// bf16 and 600 to 4096 in fp32: plain loads with .cs stores was the fastest or level with the
// fastest at every shape; .cs loads were slower wherever the two differed; plain stores were
// far slower in fp32. Rung 6, the same loads without the one-exponential change, was slower
// with plain loads and stores in a probe of the previous session, so the ladder keeps .cs there.
// We have measured this, not explained it; lab 03 says why hints are measured kernel by kernel.
template <int VPT, int VN, bool FAST = false>
__device__ __forceinline__ MaxSum chunk_ms_keep(float (&f)[VPT][VN], float e, float& e_p) {
    float m = e;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
#pragma unroll
        for (int k = 0; k < VN; ++k) m = fmaxf(m, f[j][k]);
    }
    const float shift = safe_shift(m);
    e_p = mk_exp<FAST>(e - shift);
    float s = e_p;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
#pragma unroll
        for (int k = 0; k < VN; ++k) {
            f[j][k] = mk_exp<FAST>(f[j][k] - shift);
            s += f[j][k];
        }
    }
    return {m, s};
}

template <typename T, int VPT, int STRIDE>
__device__ __forceinline__ void store_scaled(const float (&p)[VPT][Vec<T>::N], T* yb, int nvec,
                                             int tid, float f) {
    constexpr int VN = Vec<T>::N;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        const int i = j * STRIDE + tid;
        if (i < nvec) {
            Vec<T> r;
#pragma unroll
            for (int k = 0; k < VN; ++k) r.v[k] = from_float<T>(p[j][k] * f);
            store_vec(yb + static_cast<long long>(i) * VN, r);
        }
    }
}

// The row of one block (WARP_ROWS = false: THREADS threads, rung 6's layout) or of one warp
// (WARP_ROWS = true: four rows per 128-thread block, rung 7's), VPT vectors per thread.
template <typename T, int THREADS, int VPT, bool WARP_ROWS, bool LEAN = false>
__device__ __forceinline__ void softmax11(const T* x, T* y, long long M, long long N) {
    constexpr int VN = Vec<T>::N;
    constexpr int STRIDE = WARP_ROWS ? 32 : THREADS;
    __shared__ float scratch[66];
    const int tid = WARP_ROWS ? (threadIdx.x & 31) : threadIdx.x;
    const long long row =
        WARP_ROWS ? static_cast<long long>(blockIdx.x) * (THREADS / 32) + (threadIdx.x >> 5)
                  : static_cast<long long>(blockIdx.x);
    if (WARP_ROWS && row >= M) return;  // the whole warp together: its shuffles need 32 lanes
    const T* xr = x + row * N;
    T* yr = y + row * N;
    const RowSplit sp = split_row(xr, N);
    const int nvec = static_cast<int>(sp.nvec);
    float f[VPT][VN];
    load_chunk<T, VPT, STRIDE, false, LEAN>(f, xr + sp.head, 0, nvec, tid);  // plain loads (above)
    const int n_edge = sp.head + sp.tail;  // < 16 <= 32
    long long e_idx = 0;
    float e = MK_NEG_INF;
    if (tid < n_edge) {
        e_idx = edge_index(sp, tid, VN);
        e = to_float(xr[e_idx]);
    }
    float e_p;
    const MaxSum mine = chunk_ms_keep<VPT, VN, LEAN>(f, e, e_p);
    const MaxSum t = WARP_ROWS ? warp_ms(mine) : block_ms(mine, scratch);
    const float scale = (mine.m == MK_NEG_INF ? 0.f : mk_exp<LEAN>(mine.m - t.m)) / t.s;
    store_scaled<T, VPT, STRIDE>(f, yr + sp.head, nvec, tid, scale);
    if (tid < n_edge) yr[e_idx] = from_float<T>(e_p * scale);
}

// The scaled store keeps a few more values live than rung 6's: 53 registers for bf16 blocks of
// 128 threads against rung 6's 48, nine blocks per SM instead of ten. Capping them at 48
// (__launch_bounds__ with a minimum of ten blocks) spilled to local memory, so they are not.
#define SOFTMAX11_BLOCK(SUFFIX, T, THREADS)                                                  \
    extern "C" __global__ void __launch_bounds__(THREADS)                                    \
        softmax_kernel11_t##THREADS##_##SUFFIX(const T* x, T* y, long long M, long long N) { \
        softmax11<T, THREADS, 32 / Vec<T>::N, false>(x, y, M, N);                            \
    }
#define SOFTMAX11_WARP(SUFFIX, T, VPT)                                                       \
    extern "C" __global__ void __launch_bounds__(128)                                        \
        softmax_kernel11_v##VPT##_##SUFFIX(const T* x, T* y, long long M, long long N) {     \
        softmax11<T, 128, VPT, true>(x, y, M, N);                                            \
    }
// Rung 7's warp sizes, and the blocks that rows of up to 16 KB need at 32 elements per thread
// (up to 128 threads for fp32, 256 for 16-bit dtypes); every kernel takes (x, y, M, N).
#define SOFTMAX_SHORT_SHAPES(BLOCK, WARP)                                                    \
    BLOCK(f32, float, 64) BLOCK(f32, float, 128) BLOCK(f16, mk_half, 64)                     \
    BLOCK(f16, mk_half, 128) BLOCK(f16, mk_half, 256) BLOCK(bf16, mk_bf16, 64)               \
    BLOCK(bf16, mk_bf16, 128) BLOCK(bf16, mk_bf16, 256) WARP(f32, float, 1)                  \
    WARP(f32, float, 2) WARP(f32, float, 4) WARP(f32, float, 8) WARP(f16, mk_half, 1)        \
    WARP(f16, mk_half, 2) WARP(f16, mk_half, 4) WARP(bf16, mk_bf16, 1) WARP(bf16, mk_bf16, 2) \
    WARP(bf16, mk_bf16, 4)
SOFTMAX_SHORT_SHAPES(SOFTMAX11_BLOCK, SOFTMAX11_WARP)
// --8<-- [end:kernel11]


// --8<-- [start:kernel12]
// Rung 10 with the hint above, for fp32 rows. Rung 10's blocks each load a slice, then sit at the
// cluster barrier, compute and store with nothing in flight; three of them per SM do not keep
// DRAM busy on long rows (lab 02's sweep). Blocks are launched in blockIdx order, so the block
// for row r + `ahead` comes along after the blocks running now: each block, once its own slice
// is in, asks L2 for the same slice of row r + `ahead`. The host sets `ahead` to about 8 MB of
// rows: far enough that the block that reads it has not started yet, near enough that L2 (60 MB
// on an H200, shared with every row in flight) still holds it then. When it works, that block's
// loads hit L2 and the DRAM reads run while blocks wait at barriers; when it does not (the
// lines are evicted first), the same bytes are read twice. A side probe on the H200 measured it
// faster than rung 10 on every fp32 row length it tried from 64 KB to 1 MB, and slower on every
// bf16 one from 128 to 512 KB, wherever the hint was issued: the host sends 16-bit rows to
// rung 11 (why the hint hurts them is lab 02's open question).
#define SOFTMAX12_CLUSTER(THREADS, CLUSTER)                                                  \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)    \
        softmax_kernel12_t##THREADS##_c##CLUSTER##_f32(const float* x, float* y, long long N, \
                                                       int per_block, long long M, int ahead) { \
        softmax10<float, THREADS, CLUSTER, true>(x, y, N, per_block, M, ahead);              \
    }
#define SOFTMAX12_SINGLE(THREADS)                                                            \
    extern "C" __global__ void __launch_bounds__(THREADS)                                    \
        softmax_kernel12_t##THREADS##_c1_f32(const float* x, float* y, long long N,          \
                                             int per_block, long long M, int ahead) {        \
        softmax10<float, THREADS, 1, true>(x, y, N, per_block, M, ahead);                    \
    }
// Kernel 10's launch shapes (slices.py).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
SOFTMAX12_SINGLE(128) SOFTMAX12_SINGLE(256) SOFTMAX12_SINGLE(512)
SOFTMAX12_CLUSTER(256, 2) SOFTMAX12_CLUSTER(512, 2) SOFTMAX12_CLUSTER(256, 4)
SOFTMAX12_CLUSTER(256, 8) SOFTMAX12_CLUSTER(512, 8)
#endif
// --8<-- [end:kernel12]

// --8<-- [start:kernel13]
// Rung 12 (rung 11's kernels for rows under 16 KB, rung 10's above, with rung 12's prefetch on
// fp32 rows) with the exponential above: the same loads, stores and merges, fewer instructions
// per element. Written after a side profile on the H200 at 32768 x 65536 bf16 counted rung 10's
// kernel at 2.3 times QuACK's warp instructions for the same bytes, with 71% of its issue
// slots busy against QuACK's 36%, and the lab's records showed long bf16 rows at the board's
// power cap with the SM clock lowered; its SASS spent six instructions on each exponential.
#define SOFTMAX13_BLOCK(SUFFIX, T, THREADS)                                                  \
    extern "C" __global__ void __launch_bounds__(THREADS)                                    \
        softmax_kernel13_t##THREADS##_##SUFFIX(const T* x, T* y, long long M, long long N) { \
        softmax11<T, THREADS, 32 / Vec<T>::N, false, true>(x, y, M, N);                      \
    }
#define SOFTMAX13_WARP(SUFFIX, T, VPT)                                                       \
    extern "C" __global__ void __launch_bounds__(128)                                        \
        softmax_kernel13_v##VPT##_##SUFFIX(const T* x, T* y, long long M, long long N) {     \
        softmax11<T, 128, VPT, true, true>(x, y, M, N);                                      \
    }
SOFTMAX_SHORT_SHAPES(SOFTMAX13_BLOCK, SOFTMAX13_WARP)  // rung 11's launch shapes
// Rows of 16 KB and more: kernel 10's launch shapes; fp32 with rung 12's prefetch, 16-bit
// without (rung 12 sends those to rung 10). All take (x, y, N, per_block, M, ahead).
#define SOFTMAX13_SLICE(SUFFIX, T, THREADS, CLUSTER, PF)                                     \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)    \
        softmax_kernel13_t##THREADS##_c##CLUSTER##_##SUFFIX(                                 \
            const T* x, T* y, long long N, int per_block, long long M, int ahead) {          \
        softmax10<T, THREADS, CLUSTER, PF, true>(x, y, N, per_block, M, ahead);              \
    }
#define SOFTMAX13_ONE(SUFFIX, T, THREADS, PF)                                                \
    extern "C" __global__ void __launch_bounds__(THREADS) softmax_kernel13_t##THREADS##_c1_##SUFFIX( \
        const T* x, T* y, long long N, int per_block, long long M, int ahead) {              \
        softmax10<T, THREADS, 1, PF, true>(x, y, N, per_block, M, ahead);                    \
    }
#define SOFTMAX13_SLICES(SUFFIX, T, PF) \
    SOFTMAX13_ONE(SUFFIX, T, 128, PF) SOFTMAX13_ONE(SUFFIX, T, 256, PF) \
    SOFTMAX13_ONE(SUFFIX, T, 512, PF) SOFTMAX13_SLICE(SUFFIX, T, 256, 2, PF) \
    SOFTMAX13_SLICE(SUFFIX, T, 512, 2, PF) SOFTMAX13_SLICE(SUFFIX, T, 256, 4, PF) \
    SOFTMAX13_SLICE(SUFFIX, T, 256, 8, PF) SOFTMAX13_SLICE(SUFFIX, T, 512, 8, PF)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
SOFTMAX13_SLICES(f32, float, true)
SOFTMAX13_SLICES(f16, mk_half, false)
SOFTMAX13_SLICES(bf16, mk_bf16, false)
#endif
// --8<-- [end:kernel13]

// --8<-- [start:kernel14]
// Rung 14: kernel 10's cluster split with each block's slice held in registers, in the shape
// QuACK uses for long rows: 256 threads x 8 vectors = 32 KB per block (for 16-bit rows of 16 to
// 32 KB, 256 x 4 = 16 KB over two blocks; for fp32 rows of 512 KB to 1 MB, 512 x 8 = 64 KB over
// sixteen), every load of the thread issued before the first is used, and p = exp(x - m_t)
// kept in fp32 registers for the write, so each element costs one exponential and no second
// rounding. A 16-bit slice takes 8 x 8 = 64 fp32 registers of p: 80 registers in all, three
// blocks per SM. Rung 10 keeps three 64 KB slices in flight per SM in shared memory; this rung
// holds half as many bytes, in registers, and uses rung 13's exponential and bf16 unpacking.
// Why it is faster (where it is) is what lab 02 measures; the side probe that led here compared
// the shapes in the comment of _plan14 (cuda_kernels.py). Block 0 also takes the scalar edges
// of a row that is not 16-byte aligned; a cluster's last block may hold a shorter slice.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// FULL: the slice fills every thread's K vectors and the row has no scalar edges (the common
// case: 16-byte aligned rows that are a whole number of slices), so no load or loop needs a
// bound check and no edge value is kept across the exchange. A side probe on the H200 timed the
// checked version alone about a tenth slower at 32768 x 262144 bf16 than a kernel without the
// checks: the compiler wrapped every vector's max and exp in its own branch.
template <typename T, int THREADS, int K, int CLUSTER, bool FULL, bool TRIM>
__device__ __forceinline__ void softmax14_slice(ClusterExchange<2, THREADS / 32, CLUSTER>& xch,
                                                const T* xr, T* yr, const RowSplit& sp,
                                                const Slice& s, bool edge, long long N) {
    constexpr int VN = Vec<T>::N;
    const int tid = threadIdx.x;
    const T* xb = xr + sp.head + static_cast<long long>(s.first) * VN;
    T* yb = yr + sp.head + static_cast<long long>(s.first) * VN;
    Vec<T> v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {  // all K loads in flight before any is used
        const int i = tid + k * THREADS;
        if (FULL || i < s.count) v[k] = load_vec_plain(xb + static_cast<long long>(i) * VN);
    }
    const float e = !FULL && edge ? to_float(xr[edge_index(sp, tid, VN)]) : MK_NEG_INF;
    // 1. the thread's max; 2. p = exp(x - m_t) in fp32 registers, and its sum
    float m = e;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if (FULL || tid + k * THREADS < s.count) {
#pragma unroll
            for (int j = 0; j < VN; ++j) m = fmaxf(m, elem<true>(v[k], j));
        }
    }
    const bool fold = TRIM && foldable(m);
    float sum;
    float p[K][VN];
    if (fold) {  // rung 16: p = 2^(x log2 e - ms) = e^(x - m_t) 2^eta
        const float ms = m * MK_LOG2E;
        sum = mk_ex2(fmaf(e, MK_LOG2E, -ms));
#pragma unroll
        for (int k = 0; k < K; ++k) {
            if (FULL || tid + k * THREADS < s.count) {
#pragma unroll
                for (int j = 0; j < VN; ++j) {
                    p[k][j] = mk_ex2(fmaf(elem<true>(v[k], j), MK_LOG2E, -ms));
                    sum += p[k][j];
                }
            }
        }
        sum *= mk_ex2(-fmaf(m, MK_LOG2E, -ms));  // 2^-eta: the sum as if ms were exact
    } else {
        const float shift = safe_shift(m);
        sum = mk_exp<true>(e - shift);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            if (FULL || tid + k * THREADS < s.count) {
#pragma unroll
                for (int j = 0; j < VN; ++j) {
                    p[k][j] = mk_exp<true>(elem<true>(v[k], j) - shift);
                    sum += p[k][j];
                }
            }
        }
    }
    // 3. the cluster's (max, sum), then y = p * exp(m_t - m) / s (kernel 10 explains -inf rows)
    const MaxSum t = TRIM ? cluster_ms_maxfirst(xch, {m, sum}) : cluster_ms(xch, {m, sum});
    const float inv = TRIM ? mk_rcp(t.s) : 1.f / t.s;  // rung 16: s >= 1 (or 0, or NaN)
    // Rung 16's scale takes 2^eta out of p too: e^(m_t - m) 2^-eta = 2^(ms - m log2 e), with ms
    // recomputed (one FMUL) rather than kept across the exchange.
    const float f = (m == MK_NEG_INF ? 0.f
                     : fold          ? mk_ex2(fmaf(-t.m, MK_LOG2E, m * MK_LOG2E))
                                     : mk_exp<true>(m - t.m)) *
                    inv;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = tid + k * THREADS;
        if (FULL || i < s.count) {
            Vec<T> o;
#pragma unroll
            for (int j = 0; j < VN; ++j) o.v[j] = from_float<T>(p[k][j] * f);
            if constexpr (TRIM) {  // rung 16: st.global.wb, the default policy, in one STG.E.128
                __stwb(reinterpret_cast<uint4*>(yb + static_cast<long long>(i) * VN),
                       *reinterpret_cast<const uint4*>(&o));
            } else {
                store_vec(yb + static_cast<long long>(i) * VN, o);
            }
        }
    }
    // The edge's index and value are read again rather than kept across the exchange (fewer
    // live registers: no spill).
    if (!FULL && edge) {
        const long long idx = edge_index(split_row(xr, N), tid, VN);
        yr[idx] = from_float<T>(mk_exp<true>(to_float(xr[idx]) - t.m) * inv);
    }
}

// The host picks FULL (the kernels named ..._full_...) when every row is 16-byte aligned and a
// whole number of slices; one kernel holding both paths spilled registers, each alone does not.
template <typename T, int THREADS, int K, int CLUSTER, bool FULL, bool TRIM = false>
__device__ __forceinline__ void softmax14(const T* x, T* y, long long N, int per_block) {
    __shared__ ClusterExchange<2, THREADS / 32, CLUSTER> xch;
    const unsigned rank = cluster_rank();
    exchange_open(xch);  // before the loads: the barrier's wait comes later
    const long long row = blockIdx.x / CLUSTER;
    const T* xr = x + row * N;
    const RowSplit sp = split_row(xr, N);
    const Slice s = slice_of(static_cast<int>(sp.nvec), per_block, rank);
    const bool edge = rank == 0 && static_cast<int>(threadIdx.x) < sp.head + sp.tail;  // block 0
    softmax14_slice<T, THREADS, K, CLUSTER, FULL, TRIM>(xch, xr, y + row * N, sp, s, edge, N);
}

// MINB blocks per SM is a register budget: 65536 / (THREADS * MINB) registers per thread.
#define SOFTMAX14_ONE(NAME, T, THREADS, K, CLUSTER, MINB, FULL, TRIM)                        \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, MINB) \
        NAME(const T* x, T* y, long long N, int per_block) {                                 \
        softmax14<T, THREADS, K, CLUSTER, FULL, TRIM>(x, y, N, per_block);                   \
    }
// Both kernels (checked and _full_) of one slice shape for rung RUNG: 14, or 16 with TRIM.
#define SOFTMAX_SLICE_RUNG(RUNG, TRIM, SUFFIX, T, THREADS, K, CLUSTER, MINB)                 \
    SOFTMAX14_ONE(softmax_kernel##RUNG##_t##THREADS##_k##K##_c##CLUSTER##_##SUFFIX, T, THREADS, \
                  K, CLUSTER, MINB, false, TRIM)                                             \
    SOFTMAX14_ONE(softmax_kernel##RUNG##_t##THREADS##_k##K##_c##CLUSTER##_full_##SUFFIX, T,   \
                  THREADS, K, CLUSTER, MINB, true, TRIM)
#define SOFTMAX14(SUFFIX, T, THREADS, K, CLUSTER, MINB)                                      \
    SOFTMAX_SLICE_RUNG(14, false, SUFFIX, T, THREADS, K, CLUSTER, MINB)
// What _plan14 launches: 16-bit rows of 16-32 KB over two 16 KB blocks, and of 32-512 KB over
// 2 to 16 blocks of 32 KB; fp32 rows of 256-512 KB over sixteen 32 KB blocks, 512 KB-1 MB over
// sixteen 64 KB blocks. A cluster of 16 is "non-portable": the host opts the kernel in.
#define SOFTMAX_SLICES_16BIT(RUNG, TRIM, SUFFIX, T)                                          \
    SOFTMAX_SLICE_RUNG(RUNG, TRIM, SUFFIX, T, 256, 4, 2, 4)                                  \
    SOFTMAX_SLICE_RUNG(RUNG, TRIM, SUFFIX, T, 256, 8, 2, 3)                                  \
    SOFTMAX_SLICE_RUNG(RUNG, TRIM, SUFFIX, T, 256, 8, 4, 3)                                  \
    SOFTMAX_SLICE_RUNG(RUNG, TRIM, SUFFIX, T, 256, 8, 8, 3)                                  \
    SOFTMAX_SLICE_RUNG(RUNG, TRIM, SUFFIX, T, 256, 8, 16, 3)
SOFTMAX_SLICES_16BIT(14, false, f16, mk_half)
SOFTMAX_SLICES_16BIT(14, false, bf16, mk_bf16)
SOFTMAX14(f32, float, 256, 8, 16, 4) SOFTMAX14(f32, float, 512, 8, 16, 2)
#endif
// --8<-- [end:kernel14]

// --8<-- [start:kernel15]
// Rung 15: short rows in lane groups. Rung 11 gives a short row a whole warp, and each lane
// VPT = 1, 2, 4 or 8 vectors: a 600-column bf16 row (75 vectors) fills 75 of a warp's 128
// vector slots, and the exponentials of the 53 empty ones (-inf) are computed all the same. Here
// the host picks, per row length, LPR lanes per row (1 to 32, a power of two) and exactly
// VPT = ceil(nvec / LPR) vectors per lane, the pair with the fewest slots: 16 lanes x 5 vectors
// (80 slots) for that row, 32 x 5 for 600 fp32 columns (150 vectors, 160 slots). A 128-thread
// block holds 128 / LPR rows; the max and the sum cross a group's lanes with LPR-wide shuffles.
// Rows must be whole 16-byte vectors from a 16-byte aligned x (the host sends other rows to
// rung 14's plan), so there is no scalar edge, no split_row, and a row is nvec vectors from
// row * nvec. Per element: one FMNMX, one FFMA and one MUFU.EX2 for p = 2^(x log2 e - m log2 e),
// one FADD, one FMUL by 1/s: the exponent's subtraction is folded into the multiply (rung 13
// kept it apart; `foldable` says where the fold is exact enough), and 1/s is rcp.approx (s >= 1:
// the row's largest element adds exp(0)).
// Stores are plain: a side probe on the H200 timed .cs stores ~1% slower on these rows.
template <typename T, int LPR, int VPT>
__device__ __forceinline__ void softmax15(const T* __restrict__ x, T* __restrict__ y, long long M,
                                          int nvec) {
    constexpr int VN = Vec<T>::N;
    const int lane = threadIdx.x % LPR;
    const long long row = static_cast<long long>(blockIdx.x) * (128 / LPR) + threadIdx.x / LPR;
    const bool live = row < M;  // a group past the last row still joins its warp's shuffles
    const long long first = row * nvec;  // the row's first vector
    float f[VPT][VN];
#pragma unroll
    for (int j = 0; j < VPT; ++j) {  // all VPT loads in flight before any is used
        const int i = j * LPR + lane;
        if (live && i < nvec) {
            const Vec<T> v = load_vec_plain(x + (first + i) * VN);
#pragma unroll
            for (int k = 0; k < VN; ++k) f[j][k] = elem<true>(v, k);
        } else {
#pragma unroll
            for (int k = 0; k < VN; ++k) f[j][k] = MK_NEG_INF;  // adds exp(-inf) = 0 to the sum
        }
    }
    float m = MK_NEG_INF;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
#pragma unroll
        for (int k = 0; k < VN; ++k) m = fmaxf(m, f[j][k]);
    }
#pragma unroll
    for (int o = LPR / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.f;
    if (foldable(m)) {  // one FFMA per element; the whole row shares ms, so 2^eta cancels
        const float ms = m * MK_LOG2E;
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
#pragma unroll
            for (int k = 0; k < VN; ++k) {
                f[j][k] = mk_ex2(fmaf(f[j][k], MK_LOG2E, -ms));
                s += f[j][k];
            }
        }
    } else {  // |m| past MK_FOLD_MAX, inf (NaN out, as torch), or a row of -inf (0 / 0 = NaN)
        const float shift = safe_shift(m);
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
#pragma unroll
            for (int k = 0; k < VN; ++k) {
                f[j][k] = mk_ex2((f[j][k] - shift) * MK_LOG2E);
                s += f[j][k];
            }
        }
    }
#pragma unroll
    for (int o = LPR / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float inv = mk_rcp(s);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        const int i = j * LPR + lane;
        if (live && i < nvec) {
            Vec<T> o;
#pragma unroll
            for (int k = 0; k < VN; ++k) o.v[k] = from_float<T>(f[j][k] * inv);
            *reinterpret_cast<Vec<T>*>(y + (first + i) * VN) = o;
        }
    }
}

#define SOFTMAX15(SUFFIX, T, LPR, VPT)                                                        \
    extern "C" __global__ void __launch_bounds__(128) softmax_kernel15_l##LPR##_v##VPT##_##SUFFIX( \
        const T* x, T* y, long long M, int nvec) {                                            \
        softmax15<T, LPR, VPT>(x, y, M, nvec);                                                \
    }
// The (LPR, VPT) pairs the host's rule picks for some row of up to 32 x VPT_MAX vectors (8 for
// fp32, 5 for 16-bit dtypes: 32 or 40 values in registers per thread); test_softmax checks that
// each one is reachable.
#define SOFTMAX15_SHARED(SUFFIX, T)                                                          \
    SOFTMAX15(SUFFIX, T, 1, 1) SOFTMAX15(SUFFIX, T, 1, 2) SOFTMAX15(SUFFIX, T, 1, 3)          \
    SOFTMAX15(SUFFIX, T, 1, 5) SOFTMAX15(SUFFIX, T, 2, 2) SOFTMAX15(SUFFIX, T, 2, 3)          \
    SOFTMAX15(SUFFIX, T, 2, 5) SOFTMAX15(SUFFIX, T, 4, 2) SOFTMAX15(SUFFIX, T, 4, 3)          \
    SOFTMAX15(SUFFIX, T, 4, 5) SOFTMAX15(SUFFIX, T, 8, 2) SOFTMAX15(SUFFIX, T, 8, 3)          \
    SOFTMAX15(SUFFIX, T, 8, 5) SOFTMAX15(SUFFIX, T, 16, 2) SOFTMAX15(SUFFIX, T, 16, 3)        \
    SOFTMAX15(SUFFIX, T, 16, 5) SOFTMAX15(SUFFIX, T, 32, 2) SOFTMAX15(SUFFIX, T, 32, 3)       \
    SOFTMAX15(SUFFIX, T, 32, 4) SOFTMAX15(SUFFIX, T, 32, 5)
SOFTMAX15_SHARED(f32, float)
SOFTMAX15_SHARED(f16, mk_half)
SOFTMAX15_SHARED(bf16, mk_bf16)
SOFTMAX15(f32, float, 1, 7) SOFTMAX15(f32, float, 2, 7) SOFTMAX15(f32, float, 4, 7)
SOFTMAX15(f32, float, 8, 7) SOFTMAX15(f32, float, 16, 7) SOFTMAX15(f32, float, 32, 6)
SOFTMAX15(f32, float, 32, 7) SOFTMAX15(f32, float, 32, 8)
// --8<-- [end:kernel15]

// --8<-- [start:kernel16]
// Rung 16: rung 14 with fewer instructions per thread, for the same bytes. Rung 14's sm_90 SASS
// (256 threads x 8 bf16 vectors, 64 elements a thread), counted offline along the path a
// thread of a whole-slice row takes, runs about 820 instructions: about 7.5 on each element
// (the widening, the max, FADD x - m_t, FMUL by log2 e, MUFU.EX2, the sum, the scale, half a
// pack) and about 340 on the thread's row-wide work, most of them in the (max, sum) exchange.
// Rung 16 trims three things (TRIM in softmax14_slice), which the same count puts at about 600
// for that thread (fp32, 32 elements a thread: about 600 down to 360):
// - the exponent's shift folds into its multiply, rung 15's move: 2^(x log2 e - ms) with
//   ms = m_t log2 e, one FFMA where there were an FADD and an FMUL. Unlike rung 15, each thread
//   has its own shift, so the rounding of ms (the 2^eta of `foldable`) differs between threads
//   and would not cancel when their sums meet: the thread divides it out of its sum (one FFMA
//   and one MUFU.EX2) and builds its scale as 2^(ms - m log2 e), which leaves it out of p.
//   Rows whose largest |element| passes MK_FOLD_MAX take rung 14's exponent inside the same
//   kernel;
// - the (max, sum) pairs are reduced max first (cluster_ms_maxfirst): one exponential per lane
//   where ms_merge spent two per butterfly step;
// - 1/s is rcp.approx: s >= 1, since the row's largest element adds e^0.
// And one change that is not an instruction: y is written with plain stores, as rung 15 does,
// where rung 14 writes with .cs (evict-first) stores. Lab 02's profile of a first version of
// this rung (rung 14's .cs stores kept) counted fewer warp instructions than QuACK's at
// 32768 x 65536 bf16 and still a longer duration: the gap is not in the issue slots, and a
// side probe had timed .cs stores slower than plain ones on rung 15's rows.
// It also takes fp32 rows of 256 KB (65536 columns), which rung 14 leaves to rung 12, and cuts
// lab 02's 65536-column rows into other slices than rung 14 (KERNEL16_SLICES, where QuACK led):
// fp32 over two 128 KB blocks of 1024 threads x 8 vectors, bf16 over eight 16 KB blocks of
// 256 x 4, the fastest of the slices labs/probe_softmax_slices.py timed on the H200.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
SOFTMAX_SLICES_16BIT(16, true, f16, mk_half)
// bf16: rung 14's shapes, but a row of exactly 128 KB of vectors runs 256 x 4 over 8, so 256 x 8
// over 4 keeps only its checked kernel, for the rows between 64 and 128 KB.
SOFTMAX_SLICE_RUNG(16, true, bf16, mk_bf16, 256, 4, 2, 4)
SOFTMAX_SLICE_RUNG(16, true, bf16, mk_bf16, 256, 8, 2, 3)
SOFTMAX14_ONE(softmax_kernel16_t256_k8_c4_bf16, mk_bf16, 256, 8, 4, 3, false, true)
SOFTMAX_SLICE_RUNG(16, true, bf16, mk_bf16, 256, 8, 8, 3)
SOFTMAX_SLICE_RUNG(16, true, bf16, mk_bf16, 256, 8, 16, 3)
SOFTMAX_SLICE_RUNG(16, true, bf16, mk_bf16, 256, 4, 8, 4)
SOFTMAX_SLICE_RUNG(16, true, f32, float, 1024, 8, 2, 1)
SOFTMAX_SLICE_RUNG(16, true, f32, float, 256, 8, 16, 4)
SOFTMAX_SLICE_RUNG(16, true, f32, float, 512, 8, 16, 2)
#endif
// --8<-- [end:kernel16]

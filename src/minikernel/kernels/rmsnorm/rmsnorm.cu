// rmsnorm.cu: y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps), one rstd per row.
//
// Versions (one idea each; the registry key is cuda:N):
//   rmsnorm_kernel1  one block per row; each thread strides over the row once for the sum of
//                    squares and once more to write y (the second read mostly hits L1/L2)
//   rmsnorm_kernel2  16-byte vectors, and the row kept in registers between the two steps
//                    (up to 4 vectors per thread x 1024 threads); longer rows fall back to two
//                    vectorised passes
//   rmsnorm_kernel3  the row staged in shared memory, split over a thread-block cluster when it
//                    is long (sm_90+): one read of x at every length, three blocks per SM
//   rmsnorm_kernel4  rows past 32 KB: each block's slice of the row (32 or 64 KB) held in
//                    registers, loaded with plain 16-byte loads, clusters of 2-16 blocks (sm_90+)
//   rmsnorm_kernel5  kernel 4 with fewer instructions per element, where every slice is whole
//                    and there is a weight: one instruction per bf16 widened, no bounds checks;
//                    and y written with plain 16-byte stores where kernel 4 streams it (.cs)
//   rmsnorm_kernel6  rows past 256 KB in QuACK's order of steps: each 64 KB slice copied into
//                    shared memory with cp.async.ca while the weights load into registers
//
// Byte model: read x, write y (2 * M * N * sizeof(T)) plus the weight once (N * sizeof(W)).
// Every dtype computes in fp32 and rounds once on the store. The weight is either the input's
// dtype or fp32: each kernel is stamped for both (suffix _wf32 for an fp32 weight). The weight
// pointer may be null (no elementwise affine); rstd may be null (not needed without autograd).
// minikernel: max-registers 192 rmsnorm_bwd_ (one or two blocks per SM by design: each thread
// keeps its slices of x and dy and its share of the dw sums in registers, up to 8 vectors each)
// minikernel: max-registers 255 rmsnorm_bwd_tile_cluster_ (one block per SM by design: each
// thread holds xhat and g of two rows, 32 fp32 values each, and its weights and dw sums)
// minikernel: max-registers 96 rmsnorm_kernel6_ (one block per SM where an fp32 weight doubles
// the weights a 16-bit row's thread holds in registers: 16 vectors beside its 8 of x)
#include "cluster.cuh"
#include "common.cuh"

// --------------------------------------------------------------------------------------------
// Block-wide sum
// --------------------------------------------------------------------------------------------

// Sum of one float per thread over the whole block (blockDim.x a multiple of 32, <= 1024).
// Warps reduce with shuffles (no shared memory, no barrier), then warp 0 reduces the 32 warp
// sums. Every thread gets the total. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();  // every warp's sum is in scratch
    if (warp == 0) {
        const int n_warps = blockDim.x >> 5;
        v = lane < n_warps ? scratch[lane] : 0.0f;
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
        if (lane == 0) scratch[0] = v;  // all of warp 0 has read scratch[] before this write
    }
    __syncthreads();  // scratch[0] holds the total
    const float total = scratch[0];
    __syncthreads();  // nobody may overwrite scratch[0] before everyone has read it
    return total;
}

template <typename W> __device__ __forceinline__ float weight_at(const W* w, long long j) {
    return w ? to_float(w[j]) : 1.0f;  // the same branch for every thread: no divergence
}

// --------------------------------------------------------------------------------------------
// GPU kernels
// --------------------------------------------------------------------------------------------

// --8<-- [start:kernel1]
template <typename T, typename W>
__device__ __forceinline__ void rmsnorm1(const T* x, const W* w, T* y, float* rstd_out,
                                         long long n, float eps) {
    __shared__ float scratch[32];
    const long long row = blockIdx.x;  // one block per row; 64-bit so row * n cannot overflow
    const T* xr = x + row * n;
    T* yr = y + row * n;
    // Step 1: each thread sums the squares of the elements j = tid, tid + blockDim, ...
    // Consecutive threads read consecutive elements: the warp's loads coalesce.
    float ss = 0.0f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = to_float(xr[j]);
        ss += v * v;
    }
    const float rstd = rsqrtf(block_sum(ss, scratch) / static_cast<float>(n) + eps);
    // Step 2: read x again (this block just read it: L1/L2 hits for rows of modest size).
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        yr[j] = from_float<T>(to_float(xr[j]) * rstd * weight_at(w, j));
    }
    if (rstd_out && threadIdx.x == 0) rstd_out[row] = rstd;
}

#define RMSNORM1(SUFFIX, T)                                                                    \
    extern "C" __global__ void __launch_bounds__(1024)                                         \
        rmsnorm_kernel1_##SUFFIX(const T* x, const T* w, T* y, float* rstd, long long n,       \
                                 float eps) {                                                  \
        rmsnorm1<T, T>(x, w, y, rstd, n, eps);                                                 \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(1024) rmsnorm_kernel1_##SUFFIX##_wf32(        \
        const T* x, const float* w, T* y, float* rstd, long long n, float eps) {               \
        rmsnorm1<T, float>(x, w, y, rstd, n, eps);                                             \
    }
MK_FOR_EACH_DTYPE(RMSNORM1)
// --8<-- [end:kernel1]

// --8<-- [start:kernel2]
// The weights are read through the read-only path with a plain (cached) 16-byte load: every
// block reads the same N weights, so they stay in L2 (and L1) after the first blocks.
template <typename W, int K>
__device__ __forceinline__ void load_weights(const W* w, long long j, float (&out)[K]) {
    if (!w) {
#pragma unroll
        for (int e = 0; e < K; ++e) out[e] = 1.0f;
        return;
    }
    constexpr int WN = Vec<W>::N;  // K is a multiple of WN: a weight is at least as wide as T
#pragma unroll
    for (int c = 0; c < K; c += WN) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(w + j + c));
        const Vec<W> v = *reinterpret_cast<const Vec<W>*>(&raw);
#pragma unroll
        for (int e = 0; e < WN; ++e) out[c + e] = to_float(v.v[e]);
    }
}

constexpr int KERNEL2_VECS = 4;  // vectors per thread kept in registers (16 regs of data)

// Needs n % Vec<T>::N == 0 and 16-byte aligned x, y, w (the host checks; kernel1 otherwise).
template <typename T, typename W>
__device__ __forceinline__ void rmsnorm2(const T* x, const W* w, T* y, float* rstd_out,
                                         long long n, float eps) {
    constexpr int V = Vec<T>::N;  // elements per 16-byte vector: 4 (fp32) or 8 (fp16, bf16)
    __shared__ float scratch[32];
    const long long row = blockIdx.x;
    const T* xr = x + row * n;
    T* yr = y + row * n;
    const long long n_vec = n / V;
    const int tid = threadIdx.x;
    const int threads = blockDim.x;
    if (n_vec <= static_cast<long long>(KERNEL2_VECS) * threads) {
        // The whole row fits: read it once into registers (thread t holds vectors t, t + T,
        // t + 2T, ..., so a warp reads 512 consecutive bytes per step), reduce, write.
        Vec<T> keep[KERNEL2_VECS];
        float ss = 0.0f;
#pragma unroll
        for (int k = 0; k < KERNEL2_VECS; ++k) {
            const long long i = tid + static_cast<long long>(k) * threads;
            if (i < n_vec) {
                keep[k] = load_vec(xr + i * V);  // streaming: x is not read again from memory
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    const float v = to_float(keep[k].v[e]);
                    ss += v * v;
                }
            }
        }
        const float rstd = rsqrtf(block_sum(ss, scratch) / static_cast<float>(n) + eps);
#pragma unroll
        for (int k = 0; k < KERNEL2_VECS; ++k) {
            const long long i = tid + static_cast<long long>(k) * threads;
            if (i < n_vec) {
                float wf[V];
                load_weights(w, i * V, wf);
                Vec<T> out;
#pragma unroll
                for (int e = 0; e < V; ++e) out.v[e] = from_float<T>(to_float(keep[k].v[e]) * rstd * wf[e]);
                store_vec(yr + i * V, out);
            }
        }
        if (rstd_out && tid == 0) rstd_out[row] = rstd;
        return;
    }
    // A row longer than the registers hold: two vectorised passes, the second one reading x
    // back from L2 (the first pass uses a normal load, so the lines are kept).
    float ss = 0.0f;
    for (long long i = tid; i < n_vec; i += threads) {
        const uint4 raw = *reinterpret_cast<const uint4*>(xr + i * V);
        const Vec<T> v = *reinterpret_cast<const Vec<T>*>(&raw);
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = to_float(v.v[e]);
            ss += f * f;
        }
    }
    const float rstd = rsqrtf(block_sum(ss, scratch) / static_cast<float>(n) + eps);
    for (long long i = tid; i < n_vec; i += threads) {
        const Vec<T> v = load_vec(xr + i * V);
        float wf[V];
        load_weights(w, i * V, wf);
        Vec<T> out;
#pragma unroll
        for (int e = 0; e < V; ++e) out.v[e] = from_float<T>(to_float(v.v[e]) * rstd * wf[e]);
        store_vec(yr + i * V, out);
    }
    if (rstd_out && tid == 0) rstd_out[row] = rstd;
}

#define RMSNORM2(SUFFIX, T)                                                                    \
    extern "C" __global__ void __launch_bounds__(1024)                                         \
        rmsnorm_kernel2_##SUFFIX(const T* x, const T* w, T* y, float* rstd, long long n,       \
                                 float eps) {                                                  \
        rmsnorm2<T, T>(x, w, y, rstd, n, eps);                                                 \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(1024) rmsnorm_kernel2_##SUFFIX##_wf32(        \
        const T* x, const float* w, T* y, float* rstd, long long n, float eps) {               \
        rmsnorm2<T, float>(x, w, y, rstd, n, eps);                                             \
    }
MK_FOR_EACH_DTYPE(RMSNORM2)
// --8<-- [end:kernel2]

// --8<-- [start:kernel3]
// Kernel 2 keeps at most 4 vectors per thread x 1024 threads in registers (32768 bf16 values);
// past that it reads x twice. Kernel 3 stages the row in shared memory instead: a row of up to
// 64 KB in one block, a longer one in 32 KB slices over a cluster (the host picks the sizes,
// see plan3): a 131072-value bf16 row is eight blocks of one cluster, each holding an eighth. Each block sums its slice's squares while staging it, every
// warp pushes its sum to every block of the cluster (ClusterExchange: no block or cluster
// barrier, and every block adds the same values in the same order, so gets the same bits),
// and each block writes its slice. Needs n % Vec<T>::N == 0 and 16-byte aligned
// x, y, w, like kernel 2.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
template <typename T, typename W, int THREADS, int CLUSTER>
__device__ __forceinline__ void rmsnorm3(const T* x, const W* w, T* y, float* rstd_out,
                                         long long n, float eps, int per_block) {
    constexpr int V = Vec<T>::N;
    extern __shared__ __align__(16) unsigned char rmsnorm_smem[];
    Vec<T>* slice = reinterpret_cast<Vec<T>*>(rmsnorm_smem);
    __shared__ float scratch[32];
    __shared__ ClusterExchange<1, THREADS / 32, CLUSTER> xch;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    if (CLUSTER > 1) exchange_open(xch);  // before the loads: the barrier's wait comes later
    const long long row = blockIdx.x / CLUSTER;
    const T* xr = x + row * n;
    T* yr = y + row * n;
    const Slice s = slice_of(static_cast<int>(n / V), per_block, rank);
    const long long first = static_cast<long long>(s.first) * V;
    float ss = 0.0f;
    stage_vectors<T, THREADS>(xr + first, slice, s.count, [&](const Vec<T>& v) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = to_float(v.v[e]);
            ss += f * f;
        }
    });
    float total;
    if (CLUSTER > 1) {  // each warp's sum goes to every block of the cluster (cluster.cuh)
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
        exchange_push(xch, {ss});
        float acc[1] = {0.0f};
        exchange_fold(xch, acc, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
        total = acc[0];
    } else {
        total = block_sum(ss, scratch);
    }
    const float rstd = rsqrtf(total / static_cast<float>(n) + eps);
#pragma unroll 2  // the default (4) spills registers in fp32 now that no barrier splits the code
    for (int i = threadIdx.x; i < s.count; i += THREADS) {
        const long long j = first + static_cast<long long>(i) * V;
        float wf[V];
        load_weights(w, j, wf);
        const Vec<T> v = slice[i];
        Vec<T> out;
#pragma unroll
        for (int e = 0; e < V; ++e) out.v[e] = from_float<T>(to_float(v.v[e]) * rstd * wf[e]);
        store_vec(yr + j, out);
    }
    if (rstd_out && rank == 0 && threadIdx.x == 0) rstd_out[row] = rstd;
}

#define RMSNORM3_ENTRY(SUFFIX, T, W, WSUFFIX, THREADS, CLUSTER, DIMS)                          \
    extern "C" __global__ void DIMS __launch_bounds__(THREADS)                                 \
        rmsnorm_kernel3_t##THREADS##_c##CLUSTER##_##SUFFIX##WSUFFIX(                           \
            const T* x, const W* w, T* y, float* rstd, long long n, float eps, int per_block) {  \
        rmsnorm3<T, W, THREADS, CLUSTER>(x, w, y, rstd, n, eps, per_block);                    \
    }
// What the host launches (plan3): a row of up to 64 KB in one block of 128, 256 or 512
// threads; longer rows in clusters of 4 or 8 blocks of 256 threads (512 past 8 x 32 KB).
#define RMSNORM3_WEIGHT(SUFFIX, T, W, WSUFFIX) \
    RMSNORM3_ENTRY(SUFFIX, T, W, WSUFFIX, 128, 1, ) \
    RMSNORM3_ENTRY(SUFFIX, T, W, WSUFFIX, 256, 1, ) \
    RMSNORM3_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 1, ) \
    RMSNORM3_ENTRY(SUFFIX, T, W, WSUFFIX, 256, 4, __cluster_dims__(4, 1, 1)) \
    RMSNORM3_ENTRY(SUFFIX, T, W, WSUFFIX, 256, 8, __cluster_dims__(8, 1, 1)) \
    RMSNORM3_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 8, __cluster_dims__(8, 1, 1))
#define RMSNORM3(SUFFIX, T)                                                                    \
    RMSNORM3_WEIGHT(SUFFIX, T, T, )                                                            \
    RMSNORM3_WEIGHT(SUFFIX, T, float, _wf32)
MK_FOR_EACH_DTYPE(RMSNORM3)
// --8<-- [end:kernel3]

// --8<-- [start:kernel4]
// Kernel 3 copies its slice into shared memory with cp.async, waits for all of it, and reads
// it back twice. Kernel 4 keeps the slice in registers: 512 threads x 4 vectors = 32 KB per
// block, the four 16-byte loads of a thread issued back to back (plain loads, the default
// caching) before the first is used, so a block has its whole slice in flight at once, as
// kernel 3 has. At 32 registers per thread four such blocks share an SM: 128 KB in flight per
// SM, against kernel 3's six blocks that each stage 32 KB through shared memory.
// Side probes on the H200 (rows of 128 and 256 KB): kernel 3 with its cluster exchange taken
// out (a wrong result, timed only) ran about 7% faster, so each block waiting for the slowest
// of its cluster costs that much; kernel 4 keeps the exchange and ran faster still. We have
// measured that, not explained it.
// 16-bit rows need one more step. Their slice is 32 elements per thread, which the compiler,
// once it has converted them to fp32 for the sum of squares, keeps as 32 floats for the
// output too: about 50 registers, two blocks per SM, slower than kernel 3 in the probe. The
// empty asm after the sum tells it the packed 16-bit words may have changed, so it converts
// them again for the output and the floats die after the sum: 32 registers, four blocks.
// Rows past eight 32 KB slices take blocks of 1024 threads, 64 KB each (two blocks per SM),
// over clusters of 8, or 16 for rows past 512 KB, up to 1 MB: at 131072 fp32 values the probe
// measured eight 64 KB blocks faster than sixteen 32 KB ones. A cluster of 16 is
// "non-portable", allowed on sm_90 once the kernel opts in (the host does). Needs
// n % Vec<T>::N == 0 and 16-byte aligned x, y, w, like kernels 2 and 3.
constexpr int KERNEL4_VECS = 4;  // 16-byte vectors per thread (16 registers of data)

template <typename T, typename W, int THREADS, int CLUSTER>
__device__ __forceinline__ void rmsnorm4(const T* x, const W* w, T* y, float* rstd_out,
                                         long long n, float eps, int per_block) {
    constexpr int V = Vec<T>::N;
    constexpr int K = KERNEL4_VECS;
    static_assert(CLUSTER > 1, "a row that fits one block runs kernel 3");
    __shared__ ClusterExchange<1, THREADS / 32, CLUSTER> xch;
    const unsigned rank = cluster_rank();
    exchange_open(xch);  // before the loads: the barrier's wait comes later
    const long long row = blockIdx.x / CLUSTER;
    const Slice s = slice_of(static_cast<int>(n / V), per_block, rank);
    const T* xr = x + row * n + static_cast<long long>(s.first) * V;
    T* yr = y + row * n + static_cast<long long>(s.first) * V;
    const W* wr = w ? w + static_cast<long long>(s.first) * V : nullptr;
    const int tid = threadIdx.x;
    Vec<T> xv[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {  // all K loads in flight before any is used
        const int i = tid + k * THREADS;
        if (i < s.count) xv[k] = load_vec_plain(xr + static_cast<long long>(i) * V);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = tid + k * THREADS;
        if (i < s.count) {
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const float f = to_float(xv[k].v[e]);
                ss += f * f;
            }
        }
    }
    if constexpr (sizeof(T) == 2) {  // keep x packed: convert again below (see above)
#pragma unroll
        for (int k = 0; k < K; ++k) {
            uint4& r = reinterpret_cast<uint4&>(xv[k]);
            asm volatile("" : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w));
        }
    }
    // Each warp's sum goes to every block of the cluster (cluster.cuh).
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
    exchange_push(xch, {ss});
    float acc[1] = {0.0f};
    exchange_fold(xch, acc, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
    const float rstd = rsqrtf(acc[0] / static_cast<float>(n) + eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = tid + k * THREADS;
        if (i < s.count) {
            float wf[V];
            load_weights(wr, static_cast<long long>(i) * V, wf);
            Vec<T> out;
#pragma unroll
            for (int e = 0; e < V; ++e) out.v[e] = from_float<T>(to_float(xv[k].v[e]) * rstd * wf[e]);
            store_vec(yr + static_cast<long long>(i) * V, out);
        }
    }
    if (rstd_out && rank == 0 && threadIdx.x == 0) rstd_out[row] = rstd;
}

// __launch_bounds__(THREADS, 2048 / THREADS): at most 32 registers, so that 2048 threads fit.
#define RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, THREADS, CLUSTER)                                \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1)                                 \
        __launch_bounds__(THREADS, 2048 / THREADS)                                             \
        rmsnorm_kernel4_t##THREADS##_c##CLUSTER##_##SUFFIX##WSUFFIX(                           \
            const T* x, const W* w, T* y, float* rstd, long long n, float eps, int per_block) { \
        rmsnorm4<T, W, THREADS, CLUSTER>(x, w, y, rstd, n, eps, per_block);                    \
    }
// What plan4 launches: rows past 32 KB over clusters of 2 to 8 blocks of 512 threads, rows
// past 256 KB over 8 or 16 blocks of 1024 (a row that fits one block runs kernel 3: level with
// kernel 4 there in the probe, or faster).
#define RMSNORM4_WEIGHT(SUFFIX, T, W, WSUFFIX)                                                 \
    RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 2)                                              \
    RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 4)                                              \
    RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 8)                                              \
    RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, 1024, 8)                                             \
    RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, 1024, 16)
#define RMSNORM4(SUFFIX, T)                                                                    \
    RMSNORM4_WEIGHT(SUFFIX, T, T, )                                                            \
    RMSNORM4_WEIGHT(SUFFIX, T, float, _wf32)
MK_FOR_EACH_DTYPE(RMSNORM4)
// --8<-- [end:kernel4]

// --8<-- [start:kernel5]
// Kernel 4 with fewer instructions per element, for the rows where every block's slice is
// whole (every thread holds K vectors: the host checks) and there is a weight. Written after
// the lab's two-second loops at the power limit had QuACK spending less energy per call than
// kernel 4 on the same bytes, and its profile at about two thirds of kernel 4's instructions.
// Kernel 4's SASS (bf16, eight blocks of 512) spends its instructions on three things this one
// drops:
//   - the high bf16 of a 32-bit word widened in two steps (a PRMT moves it down, a shift moves
//     it back up) where one AND gives the same fp32; the low one is one shift either way. Each
//     element is widened three times: x for the sum of squares, x again and w for the output;
//   - a bounds check per vector in each of the three loops, with its branch and the
//     reconvergence marks around it (BSSY, BSYNC);
//   - the weight pointer's null test per vector, and a 1.0 moved into every weight slot for the
//     case without one.
// Same loads, same cluster exchange and the same arithmetic in the same order, so the same bits
// as kernel 4. One change is not an instruction: y goes out with plain 16-byte stores (__stwb:
// st.global.wb, the default policy, one STG.E.128) where kernel 4's are streaming (.cs, evict
// first), as softmax's rung 16 found on its long rows. labs/probe_rmsnorm_forward_stores.py
// timed this kernel both ways at every slice of the lab's long rows on the H200: the plain
// stores were faster at the shipped slice of each row, and no slower at any other.
constexpr int KERNEL5_VECS = KERNEL4_VECS;

// Element e of a 16-byte vector as fp32, for 16-bit floats read as 32-bit words (the same
// widening as softmax.cu's lean_elem, repeated here so that editing one file does not change
// the other's measured source). bf16: the low half shifted up, the high half with the low
// half cleared. fp16 and fp32: the plain conversion.
template <typename T> __device__ __forceinline__ float lean_at(const Vec<T>& v, int e) {
    return to_float(v.v[e]);
}
__device__ __forceinline__ float lean_at(const Vec<mk_bf16>& v, int e) {
    const unsigned w = reinterpret_cast<const unsigned*>(&v)[e >> 1];
    return __uint_as_float((e & 1) ? (w & 0xffff0000u) : (w << 16));
}

template <typename T, typename W, int THREADS, int CLUSTER>
__device__ __forceinline__ void rmsnorm5(const T* x, const W* w, T* y, float* rstd_out,
                                         long long n, float eps, int per_block) {
    constexpr int V = Vec<T>::N;
    constexpr int K = KERNEL5_VECS;
    constexpr int WPV = V / Vec<W>::N;  // weight vectors per vector of x (1, or 2 for fp32 w)
    static_assert(CLUSTER > 1, "a row that fits one block runs kernel 3");
    __shared__ ClusterExchange<1, THREADS / 32, CLUSTER> xch;
    const unsigned rank = cluster_rank();
    exchange_open(xch);
    const long long row = blockIdx.x / CLUSTER;
    // per_block == THREADS * K: the host checks it (plan5)
    const long long first = static_cast<long long>(rank) * per_block * V;
    const T* xr = x + row * n + first;
    T* yr = y + row * n + first;
    const W* wr = w + first;
    const int tid = threadIdx.x;
    Vec<T> xv[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {  // all K loads in flight before any is used, as in kernel 4
        xv[k] = load_vec_plain(xr + static_cast<long long>(tid + k * THREADS) * V);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = lean_at(xv[k], e);
            ss += f * f;
        }
    }
    if constexpr (sizeof(T) == 2) {  // keep x packed: widen it again below (kernel 4 says why)
#pragma unroll
        for (int k = 0; k < K; ++k) {
            uint4& r = reinterpret_cast<uint4&>(xv[k]);
            asm volatile("" : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w));
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
        const long long i = static_cast<long long>(tid + k * THREADS) * V;
        // The weights with a plain load, not kernel 4's __ldg: without the bounds checks
        // nothing kept ptxas from hoisting every read-only (.nc) weight load above the first
        // store, and K weight vectors next to x spilled (fp32 rows, fp32 weights). A plain load
        // may alias y, so each stays after the store before it, where kernel 4's branches
        // keep its own.
        Vec<W> wv[WPV];
#pragma unroll
        for (int c = 0; c < WPV; ++c) {
            const uint4 raw = *reinterpret_cast<const uint4*>(wr + i + c * Vec<W>::N);
            wv[c] = *reinterpret_cast<const Vec<W>*>(&raw);
        }
        Vec<T> out;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float wf = lean_at(wv[e / Vec<W>::N], e % Vec<W>::N);
            out.v[e] = from_float<T>(lean_at(xv[k], e) * rstd * wf);
        }
        __stwb(reinterpret_cast<uint4*>(yr + i), *reinterpret_cast<const uint4*>(&out));
    }
    if (rstd_out && rank == 0 && threadIdx.x == 0) rstd_out[row] = rstd;
}

#define RMSNORM5_ENTRY(SUFFIX, T, W, WSUFFIX, THREADS, CLUSTER)                                \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1)                                 \
        __launch_bounds__(THREADS, 2048 / THREADS)                                             \
        rmsnorm_kernel5_t##THREADS##_c##CLUSTER##_##SUFFIX##WSUFFIX(                           \
            const T* x, const W* w, T* y, float* rstd, long long n, float eps, int per_block) { \
        rmsnorm5<T, W, THREADS, CLUSTER>(x, w, y, rstd, n, eps, per_block);                    \
    }
// Kernel 4's launch shapes (plan4 picks them; plan5 keeps the whole ones).
#define RMSNORM5_WEIGHT(SUFFIX, T, W, WSUFFIX)                                                 \
    RMSNORM5_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 2)                                              \
    RMSNORM5_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 4)                                              \
    RMSNORM5_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 8)                                              \
    RMSNORM5_ENTRY(SUFFIX, T, W, WSUFFIX, 1024, 8)                                             \
    RMSNORM5_ENTRY(SUFFIX, T, W, WSUFFIX, 1024, 16)
#define RMSNORM5(SUFFIX, T)                                                                    \
    RMSNORM5_WEIGHT(SUFFIX, T, T, )                                                            \
    RMSNORM5_WEIGHT(SUFFIX, T, float, _wf32)
MK_FOR_EACH_DTYPE(RMSNORM5)
// --8<-- [end:kernel5]

// --8<-- [start:kernel6]
// Rows past 256 KB (more than eight 32 KB slices), where rungs 4 and 5 take blocks of 1024
// threads and QuACK stayed ahead of both. QuACK's forward (quack/rmsnorm.py) does the same work
// as rung 3 in another order, and the order is this kernel: every thread
//   1. copies its 8 vectors of x into shared memory with cp.async, all in one go;
//   2. loads the weights of those vectors into registers while the copies are in flight;
//   3. waits, reads its vectors back for the sum of squares, and exchanges the sum over the
//      cluster as rung 5 does;
//   4. reads its vectors back again and writes y with each weight already in a register, so the
//      eight stores go out back to back (rung 5's stores each wait for a weight load from L2).
// The copy is cp.async.ca, which allocates the lines in L1 on the way, where rung 3's
// cp_async16 (cluster.cuh) is .cg, L2 only. In a side probe on the H200
// (labs/probe_rmsnorm_forward_staged.py) that one letter was the difference: with .cg this
// kernel at QuACK's own block shape was far behind QuACK and rung 4, with .ca it passed both at
// 131072 fp32 values; plain stores instead of store_vec's streaming ones halved its speed. We
// have measured this, not explained it. 512 threads x 8 vectors = 64 KB a block (the probe's
// fastest there, over a cluster of 8; 16 for 1 MB rows), two blocks an SM; at the shorter rows
// the probe had it level with rung 5, which keeps them. Needs every slice whole and a weight,
// like rung 5 (plan6 checks; rung 5 runs the rest).
constexpr int KERNEL6_THREADS = 512;
constexpr int KERNEL6_VECS = 8;  // 16-byte vectors per thread: 64 KB of x per block

__device__ __forceinline__ void cp_async16_ca(void* smem, const void* gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

template <typename T, typename W, int CLUSTER>
__device__ __forceinline__ void rmsnorm6(const T* x, const W* w, T* y, float* rstd_out,
                                         long long n, float eps) {
    constexpr int V = Vec<T>::N;
    constexpr int K = KERNEL6_VECS;
    constexpr int THREADS = KERNEL6_THREADS;
    constexpr int WPV = V / Vec<W>::N;  // weight vectors per vector of x (1, or 2 for fp32 w)
    extern __shared__ __align__(16) unsigned char rmsnorm6_smem[];
    Vec<T>* slice = reinterpret_cast<Vec<T>*>(rmsnorm6_smem);
    __shared__ ClusterExchange<1, THREADS / 32, CLUSTER> xch;
    const unsigned rank = cluster_rank();
    exchange_open(xch);
    const long long row = blockIdx.x / CLUSTER;
    const long long first = static_cast<long long>(rank) * THREADS * K * V;
    const T* xr = x + row * n + first;
    T* yr = y + row * n + first;
    const W* wr = w + first;
    const int tid = threadIdx.x;
    // 1. Thread t copies vectors t, t + THREADS, ...: a warp reads 512 contiguous bytes a copy.
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = tid + k * THREADS;
        cp_async16_ca(slice + i, xr + static_cast<long long>(i) * V);
    }
    // 2. Its weights, while the copies fly (read-only loads: no store has been issued yet).
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
    // 3. Each thread reads back only what it copied: the wait is the only synchronisation.
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
    // 4. y = x * rstd * w, the weights already in registers.
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
        store_vec(yr + static_cast<long long>(i) * V, out);
    }
    if (rstd_out && rank == 0 && threadIdx.x == 0) rstd_out[row] = rstd;
}

// Two blocks an SM (64 registers a thread), one where an fp32 weight doubles the weights a
// 16-bit row's thread holds. per_block is the host's check that the slice is whole (plan6).
#define RMSNORM6_ENTRY(SUFFIX, T, W, WSUFFIX, CLUSTER)                                         \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1)                                 \
        __launch_bounds__(KERNEL6_THREADS, sizeof(W) > sizeof(T) ? 1 : 2)                      \
        rmsnorm_kernel6_t512_c##CLUSTER##_##SUFFIX##WSUFFIX(                                   \
            const T* x, const W* w, T* y, float* rstd, long long n, float eps, int per_block) { \
        (void)per_block;                                                                       \
        rmsnorm6<T, W, CLUSTER>(x, w, y, rstd, n, eps);                                        \
    }
#define RMSNORM6_WEIGHT(SUFFIX, T, W, WSUFFIX)                                                 \
    RMSNORM6_ENTRY(SUFFIX, T, W, WSUFFIX, 8)                                                   \
    RMSNORM6_ENTRY(SUFFIX, T, W, WSUFFIX, 16)
#define RMSNORM6(SUFFIX, T)                                                                    \
    RMSNORM6_WEIGHT(SUFFIX, T, T, )                                                            \
    RMSNORM6_WEIGHT(SUFFIX, T, float, _wf32)
MK_FOR_EACH_DTYPE(RMSNORM6)
// --8<-- [end:kernel6]
#endif  // __CUDA_ARCH__ >= 900

// A thread's dw sums, acc[k] for its vectors first + k * step (those below count), stored as
// float4s into dst, one float per column: how both persistent backwards hand theirs on.
template <int K, int V>
__device__ __forceinline__ void store_sums(float* dst, const float (&acc)[K][V], int first, int step,
                                           int count) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int i = first + step * k;
        if (i < count) {
#pragma unroll
            for (int e = 0; e < V; e += 4) {
                *reinterpret_cast<float4*>(dst + static_cast<long long>(i) * V + e) =
                    make_float4(acc[k][e], acc[k][e + 1], acc[k][e + 2], acc[k][e + 3]);
            }
        }
    }
}

// --8<-- [start:backward]
// The backward pass. With xhat = x * rstd and g = dy * w:
//   dx = rstd * g - x * (rstd^3 / N) * sum_j g_j x_j    (one reduction per row)
//   dw = sum over rows of dy * xhat                      (one reduction per column)
// Byte model: read x and dy, write dx (3 * M * N elements), plus w and dw.
//
// The column sums shape the kernel: a block that always owns the same columns can keep its
// share of dw in registers over every row it visits, and write it once. So it is persistent:
// G clusters, as many as the GPU holds at once; cluster g walks rows g, g + G, ...; block r of a
// cluster always owns slice r of each row (up to 32 KB of it; clusters of up to 8). Its slice
// of w is the same in every row, so the block copies it into shared memory once, before the
// first row. Per row a block copies its slices of x and dy into shared memory with cp.async,
// reads them into registers, and at once starts the copies of its next row into the same
// buffers (each thread copies and reads only its own vectors: no barrier); then it sums g * x,
// swaps the sums with the other blocks of its cluster (RowExchange, cluster.cuh), and writes dx
// while the next row is on its way. Every element is read once and written once:
// Triton's backward (triton_kernels.py) reads a long row twice, once for the sum and again for
// dx. At the end each block writes its dw partial sums, one row of `dw_part` per cluster,
// which a second small kernel adds up in a fixed order. Needs n % Vec<T>::N == 0 and 16-byte
// aligned pointers, like kernel 3.

// One vector of dx from the row's r (rstd) and coef (r^3 / N times the row's sum of g x), and
// the same elements' share of dw added to acc: what both CUDA backwards do per vector.
template <typename T, int V>
__device__ __forceinline__ Vec<T> dx_and_dw(const Vec<T>& xv, const Vec<T>& dv, const float (&wf)[V],
                                            float r, float coef, float (&acc)[V]) {
    Vec<T> out;
#pragma unroll
    for (int e = 0; e < V; ++e) {
        const float xf = to_float(xv.v[e]), df = to_float(dv.v[e]);
        out.v[e] = from_float<T>(df * wf[e] * r - xf * coef);
        acc[e] += df * xf * r;
    }
    return out;
}

// The weights of `count` elements from shared memory, where the block staged its slice of w
// (1.0 for each when there is no weight; `s` is then never read).
// Why staged: reading them from global memory at each use, twice per row (the L1 or L2 hits of
// load_weights), made the kernel 3-14 % slower at every long shape of the lab in a side probe
// on the H200: those loads sit between the row's data arriving and its sum being ready.
template <typename W, int COUNT>
__device__ __forceinline__ void staged_weights(const W* w, const W* s, float (&out)[COUNT]) {
    if (!w) {
#pragma unroll
        for (int e = 0; e < COUNT; ++e) out[e] = 1.0f;
        return;
    }
    constexpr int WN = Vec<W>::N;  // COUNT is a multiple of WN, as in load_weights
#pragma unroll
    for (int c = 0; c < COUNT; c += WN) {
        const Vec<W> v = *reinterpret_cast<const Vec<W>*>(s + c);
#pragma unroll
        for (int e = 0; e < WN; ++e) out[c + e] = to_float(v.v[e]);
    }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
template <typename T, typename W, int THREADS, int CLUSTER, int K>
__device__ __forceinline__ void rmsnorm_bwd(const T* dy, const T* x, const W* w,
                                            const float* rstd, T* dx, float* dw_part,
                                            long long m, long long n, int per_block) {
    constexpr int V = Vec<T>::N;
    extern __shared__ __align__(16) unsigned char rmsnorm_smem[];
    Vec<T>* xs = reinterpret_cast<Vec<T>*>(rmsnorm_smem);
    Vec<T>* ds = xs + per_block;
    W* ws = reinterpret_cast<W*>(ds + per_block);  // per_block * V weights (none if w is null)
    __shared__ RowExchange<1, THREADS / 32, CLUSTER> xch;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    const Slice s = slice_of(static_cast<int>(n / V), per_block, rank);
    const long long first = static_cast<long long>(s.first) * V;  // first column of the slice
    const long long groups = gridDim.x / CLUSTER;
    const int tid = threadIdx.x;
    auto prefetch = [&](long long row) {
        const T* xr = x + row * n + first;
        const T* dr = dy + row * n + first;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = tid + k * THREADS;
            if (i < s.count) {
                cp_async16(xs + i, xr + static_cast<long long>(i) * V);
                cp_async16(ds + i, dr + static_cast<long long>(i) * V);
            }
        }
    };

    float acc[K][V];  // this thread's columns of dw, summed over the rows it visits
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[k][e] = 0.0f;
    if (w) {  // the block's slice of w, once: the first row's wait below covers these copies
        constexpr int WE = 16 / sizeof(W);  // weights per 16-byte copy: V or V / 2
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = tid + k * THREADS;
            if (i < s.count) {
#pragma unroll
                for (int e = 0; e < V; e += WE) {
                    cp_async16(ws + i * V + e, w + first + static_cast<long long>(i) * V + e);
                }
            }
        }
    }
    row_exchange_open(xch);
    long long row = blockIdx.x / CLUSTER;
    if (row < m) prefetch(row);
    for (int visit = 0; row < m; row += groups, ++visit) {
        const float r = rstd[row];
        cp_async_wait_all();  // this row's copies (the only ones in flight; first: the weights)
        Vec<T> xv[K], dv[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = tid + k * THREADS;
            if (i < s.count) {
                xv[k] = xs[i];
                dv[k] = ds[i];
            }
        }
        // The slices are in registers now: the next row's copies may overwrite them. (Two rows
        // in flight, in two buffers, was slower, not faster, in a side probe on the H200.)
        if (row + groups < m) prefetch(row + groups);
        float dot = 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = tid + k * THREADS;
            if (i < s.count) {
                float wf[V];
                staged_weights(w, ws + i * V, wf);
#pragma unroll
                for (int e = 0; e < V; ++e) dot += to_float(dv[k].v[e]) * wf[e] * to_float(xv[k].v[e]);
            }
        }
        float v[1] = {dot}, total[1] = {0.0f};
        warp_merge(v, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
        row_exchange(xch, visit, v, total, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
        const float coef = total[0] * r * r * r / static_cast<float>(n);
        T* dxr = dx + row * n + first;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = tid + k * THREADS;
            if (i < s.count) {
                float wf[V];
                staged_weights(w, ws + i * V, wf);
                store_vec(dxr + static_cast<long long>(i) * V,
                          dx_and_dw<T, V>(xv[k], dv[k], wf, r, coef, acc[k]));
            }
        }
    }
    if (dw_part) {  // row g of dw_part: this cluster's sums, 16-byte stores
        store_sums(dw_part + (blockIdx.x / CLUSTER) * n + first, acc, tid, THREADS, s.count);
    }
}

#define RMSNORM_BWD_ENTRY(SUFFIX, T, W, WSUFFIX, THREADS, CLUSTER, K)                         \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)      \
        rmsnorm_bwd_kernel_t##THREADS##_c##CLUSTER##_k##K##_##SUFFIX##WSUFFIX(                 \
            const T* dy, const T* x, const W* w, const float* rstd, T* dx, float* dw_part,     \
            long long m, long long n, int per_block) {                                         \
        rmsnorm_bwd<T, W, THREADS, CLUSTER, K>(dy, x, w, rstd, dx, dw_part, m, n, per_block);  \
    }
// What plan_bwd launches: rows longer than 32 KB (shorter ones go to Triton's backward, which
// reads them once too), over clusters of 2, 4 or 8 blocks that own up to 32 KB each, 512
// threads of K = 4 vectors per tensor; 512 x 8 for fp32 rows past 8 x 32 KB. (256 threads of 8
// vectors measured slower on the H200, and its 16-bit build used more than 192 registers under
// some NVRTC versions: it is not built.)
#define RMSNORM_BWD_WEIGHT(SUFFIX, T, W, WSUFFIX) \
    RMSNORM_BWD_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 2, 4) \
    RMSNORM_BWD_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 4, 4) \
    RMSNORM_BWD_ENTRY(SUFFIX, T, W, WSUFFIX, 512, 8, 4)
#define RMSNORM_BWD(SUFFIX, T)                                                                 \
    RMSNORM_BWD_WEIGHT(SUFFIX, T, T, )                                                         \
    RMSNORM_BWD_WEIGHT(SUFFIX, T, float, _wf32)
MK_FOR_EACH_DTYPE(RMSNORM_BWD)
// fp32 rows past 8 x 32 KB: 8 vectors per thread (16-bit ones would spill: Triton takes those)
RMSNORM_BWD_ENTRY(f32, float, float, , 512, 8, 8)
RMSNORM_BWD_ENTRY(f32, float, float, _wf32, 512, 8, 8)
#endif  // __CUDA_ARCH__ >= 900
// --8<-- [end:backward]

// --8<-- [start:backward_rows]
// The backward pass for short rows: up to 32 x 8 vectors, 2048 16-bit or 1024 fp32 elements.
// Here the cluster kernel above has little to split and Triton's backward (one program per SM
// stepping through a few rows at a time, each step ending at a block barrier) keeps too few
// bytes in flight. So one warp owns a whole row: lane l holds vectors l, l + 32, ..., K of them
// per tensor, the row's sum of g * x is a warp shuffle (no barrier), and the warp moves on to
// its next row, while the other warps of the SM are at other points of theirs. A block is all
// the warps one SM holds (one block per SM by design, THREADS set by the registers K needs), and
// each warp walks rows warp, warp + W, warp + 2W, ... (W warps in the grid), summing dy * xhat
// for its columns in registers. At the end the block adds up its warps' sums through shared
// memory, in warp order, and writes one row of `dw_part`; reduce_dw adds the blocks' rows, also
// in a fixed order: dw is the same on every run. Needs n % Vec<T>::N == 0 and 16-byte aligned
// dy, x, w and dx (the host checks). Dynamic shared memory: ROWS_BWD_SLOTS x n floats.
constexpr int ROWS_BWD_SLOTS = 2;  // warps whose dw sums are in shared memory at once
// All the blocks of the grid meet here (they must all be resident at once: the host launches
// this kernel cooperatively, so the driver refuses a grid that would not be). `bar` is one
// word that only this launch uses while it runs; the sum of what the blocks add is 2^31, so the
// top bit flips once every block has arrived and the word is ready for the next launch as it
// is (the algorithm of CUDA's cooperative groups). The fence before the add publishes this
// block's writes; the acquire load makes every other block's visible after the wait.
__device__ __forceinline__ void grid_barrier(unsigned* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        __threadfence();
        const unsigned old = atomicAdd(bar, add);
        unsigned now;
        do {
            asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(now) : "l"(bar) : "memory");
        } while (((old ^ now) & 0x80000000u) == 0);
    }
    __syncthreads();
}

// The end of both warp-per-row backwards (this one and rmsnorm_bwd_ring below): the block's
// dw sums (acc, per lane as the warps hold them) as its row of dw_part, then, with `dw`, the
// grid-wide fold of those rows into dw. `dw_slots`: shared memory for max(ROWS_BWD_SLOTS n,
// THREADS) floats that no warp uses any more.
template <typename W, int K, int V, int THREADS>
__device__ __forceinline__ void rows_dw_finish(const float (&acc)[K][V], float* dw_slots,
                                               float* dw_part, W* dw, unsigned* bar,
                                               long long n, int nvec) {
    constexpr int WARPS = THREADS / 32;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    // The block's dw: ROWS_BWD_SLOTS warps at a time put their sums in shared memory, and each
    // thread adds them, in warp order, to the columns it owns (threadIdx.x + c * THREADS).
    // Room for every warp at once (up to 96 KB) measured 2-3 us slower on the H200: the
    // shared memory it takes from L1 slowed the whole kernel, not only this step.
    constexpr int CEIL = (32 * K * V + THREADS - 1) / THREADS;  // columns per thread, at most
    float colsum[CEIL];
#pragma unroll
    for (int c = 0; c < CEIL; ++c) colsum[c] = 0.0f;
    for (int first = 0; first < WARPS; first += ROWS_BWD_SLOTS) {
        if (warp >= first && warp < first + ROWS_BWD_SLOTS) {
            store_sums(dw_slots + static_cast<long long>(warp - first) * n, acc, lane, 32, nvec);
        }
        __syncthreads();  // these warps' sums are in the slots
#pragma unroll
        for (int c = 0; c < CEIL; ++c) {
            const long long j = threadIdx.x + static_cast<long long>(c) * THREADS;
            if (j < n) {
#pragma unroll
                for (int s = 0; s < ROWS_BWD_SLOTS; ++s)
                    if (first + s < WARPS) colsum[c] += dw_slots[static_cast<long long>(s) * n + j];
            }
        }
        __syncthreads();  // everyone has read the slots before the next warps write them
    }
    float* out = dw_part + static_cast<long long>(blockIdx.x) * n;
#pragma unroll
    for (int c = 0; c < CEIL; ++c) {
        const long long j = threadIdx.x + static_cast<long long>(c) * THREADS;
        if (j < n) out[j] = colsum[c];
    }
    if (!dw) return;  // reduce_dw adds the blocks' rows in a second kernel
    // Folded: every block's row is written once all have met; block b then adds up columns
    // [b C, b C + C) of all P rows. Thread t takes column t % C and rows g, g + G, ... with
    // g = t / C (G groups of C threads), and the first C threads add the G group sums in group
    // order: the same order on every run.
    grid_barrier(bar);
    const int P = gridDim.x;
    const int C = static_cast<int>((n + P - 1) / P);
    const int G = THREADS / C;  // C <= 2048 / 132 < THREADS on any GPU with >= 8 SMs (host checks)
    const int t = threadIdx.x;
    const long long col = static_cast<long long>(blockIdx.x) * C + t % C;
    float s = 0.0f;
    if (t < G * C && col < n) {
        for (int p = t / C; p < P; p += G) s += __ldcg(dw_part + static_cast<long long>(p) * n + col);
    }
    dw_slots[t] = s;  // THREADS floats: the slots hold 2 n >= THREADS (host checks)
    __syncthreads();
    if (t < C && col < n) {
        float total = 0.0f;
        for (int g = 0; g < G; ++g) total += dw_slots[g * C + t];
        dw[col] = from_float<W>(total);
    }
}

template <typename T, typename W, int K, int THREADS>
__device__ __forceinline__ void rmsnorm_bwd_rows(const T* dy, const T* x, const W* w,
                                                 const float* rstd, T* dx, float* dw_part,
                                                 W* dw, unsigned* bar, long long m, int nvec) {
    constexpr int V = Vec<T>::N;
    constexpr int WARPS = THREADS / 32;
    extern __shared__ __align__(16) float dw_slots[];  // [ROWS_BWD_SLOTS][n]: warps' dw sums
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const long long n = static_cast<long long>(nvec) * V;
    const long long stride = static_cast<long long>(gridDim.x) * WARPS;
    float acc[K][V];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[k][e] = 0.0f;
    for (long long row = static_cast<long long>(blockIdx.x) * WARPS + warp; row < m; row += stride) {
        const T* xr = x + row * n;
        const T* dr = dy + row * n;
        Vec<T> xv[K], dv[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {  // every load of the row issued before any is used
            const int i = lane + 32 * k;
            if (i < nvec) {
                xv[k] = load_vec_plain(xr + static_cast<long long>(i) * V);
                dv[k] = load_vec_plain(dr + static_cast<long long>(i) * V);
            }
        }
        const float r = rstd[row];
        float dot = 0.0f;  // this lane's share of sum_j dy_j w_j x_j
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = lane + 32 * k;
            if (i < nvec) {
                float wf[V];
                load_weights(w, static_cast<long long>(i) * V, wf);
#pragma unroll
                for (int e = 0; e < V; ++e) dot += to_float(dv[k].v[e]) * wf[e] * to_float(xv[k].v[e]);
            }
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        const float coef = dot * r * r * r / static_cast<float>(n);
        T* dxr = dx + row * n;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = lane + 32 * k;
            if (i < nvec) {
                float wf[V];
                load_weights(w, static_cast<long long>(i) * V, wf);  // an L1 hit by now
                store_vec(dxr + static_cast<long long>(i) * V,
                          dx_and_dw<T, V>(xv[k], dv[k], wf, r, coef, acc[k]));
            }
        }
    }
    if (!dw_part) return;  // the same for every thread: no barrier is skipped by some only
    rows_dw_finish<W, K, V, THREADS>(acc, dw_slots, dw_part, dw, bar, n, nvec);
}

#define RMSNORM_BWD_ROWS_ENTRY(SUFFIX, T, W, WSUFFIX, K, THREADS)                              \
    extern "C" __global__ void __launch_bounds__(THREADS, 1)                                   \
        rmsnorm_bwd_rows_kernel_k##K##_t##THREADS##_##SUFFIX##WSUFFIX(                         \
            const T* dy, const T* x, const W* w, const float* rstd, T* dx, float* dw_part,     \
            W* dw, unsigned* bar, long long m, int nvec) {                                     \
        rmsnorm_bwd_rows<T, W, K, THREADS>(dy, x, w, rstd, dx, dw_part, dw, bar, m, nvec);     \
    }
// What plan_bwd_rows launches (ROWS_BWD_THREADS in __init__.py): as many threads as the
// registers of K vectors per lane let one SM hold. K = 4: 640 threads (at 768 the 16-bit builds
// spill, and with the folded dw sum the fp32 one on sm_120 too); K = 8: 384 (the fp32 build
// spills at 448 and 512 on sm_120, whose compiler caps it at 128 registers there).
#define RMSNORM_BWD_ROWS_WEIGHT(SUFFIX, T, W, WSUFFIX, T4, T8)                                 \
    RMSNORM_BWD_ROWS_ENTRY(SUFFIX, T, W, WSUFFIX, 4, T4)                                       \
    RMSNORM_BWD_ROWS_ENTRY(SUFFIX, T, W, WSUFFIX, 8, T8)
#define RMSNORM_BWD_ROWS(SUFFIX, T, T4, T8)                                                    \
    RMSNORM_BWD_ROWS_WEIGHT(SUFFIX, T, T, , T4, T8)                                            \
    RMSNORM_BWD_ROWS_WEIGHT(SUFFIX, T, float, _wf32, T4, T8)
RMSNORM_BWD_ROWS(f32, float, 640, 384)
RMSNORM_BWD_ROWS(f16, mk_half, 640, 384)
RMSNORM_BWD_ROWS(bf16, mk_bf16, 640, 384)
// --8<-- [end:backward_rows]

// --8<-- [start:backward_tile_parts]
// The fixed-length backwards (rmsnorm_bwd_tile in fp32, rmsnorm_bwd_tile_cluster in fp32 and
// 16-bit) share these parts. A block owns THREADS x VPT 16-byte vectors of each row it visits (all of it, or its
// cluster rank's slice); thread t owns vectors t, t + THREADS, ... of them, so a warp's loads
// and stores are contiguous, and it keeps them at the same places of its shared-memory buffers.

// Pipelined copies: commit closes this thread's copies issued since the last commit into one
// group; wait_groups<N> returns once all but the newest N of its groups have landed.
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait_groups() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// One 16-byte copy from global to shared memory that bypasses L1 (.cg), with the L2::128B hint:
// L2 fetches the whole 128-byte line, which this warp's neighbouring copies use.
__device__ __forceinline__ void cp_async16_l2(uint4* dst, const void* src) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory");
}

// This thread's vectors of a row of x and of dy (from xr and dr, the row plus the thread's
// first column) into its slots of xs and ds, closed as one group of copies.
template <typename T, int THREADS, int VPT>
__device__ __forceinline__ void tile_copy(uint4* xs, uint4* ds, const T* xr, const T* dr) {
    constexpr int VN = Vec<T>::N;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        cp_async16_l2(xs + k * THREADS, xr + k * THREADS * VN);
        cp_async16_l2(ds + k * THREADS, dr + k * THREADS * VN);
    }
}

// A row's vectors from shared memory into xh = x * r and g = dy * w (weight(k, wk) fills wk
// with vector k's weights), dy * xh added to the dw sums; returns this thread's part of
// sum(g * xh). Every element in fp32, whatever T is.
template <typename T, int THREADS, int VPT, typename Weight>
__device__ __forceinline__ float tile_take(const uint4* xs, const uint4* ds, float r,
                                           Weight&& weight, float (&xh)[VPT][Vec<T>::N],
                                           float (&g)[VPT][Vec<T>::N],
                                           float (&acc)[VPT][Vec<T>::N]) {
    constexpr int VN = Vec<T>::N;
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const Vec<T> xv = *reinterpret_cast<const Vec<T>*>(xs + k * THREADS);
        const Vec<T> dv = *reinterpret_cast<const Vec<T>*>(ds + k * THREADS);
        float wk[VN];
        weight(k, wk);
#pragma unroll
        for (int e = 0; e < VN; ++e) {
            const float xa = to_float(xv.v[e]), da = to_float(dv.v[e]);
            xh[k][e] = xa * r;
            g[k][e] = da * wk[e];
            dot = fmaf(g[k][e], xh[k][e], dot);
            acc[k][e] = fmaf(da, xh[k][e], acc[k][e]);
        }
    }
    return dot;
}

// dx = (g - xh * c) * r into the row at dxr, rounded once to T, with plain 16-byte stores
// (__stwb, the default write-back policy; STG.E.128.STRONG.SM on sm_90) where these kernels
// first streamed dx (.cs, evict first: nothing here reads it again). Rung 5's forward gained
// from the same change to its stores of y; labs/probe_rmsnorm_backward_stores.py races the two.
template <typename T, int THREADS, int VPT>
__device__ __forceinline__ void tile_give(T* dxr, float c, float r,
                                          const float (&xh)[VPT][Vec<T>::N],
                                          const float (&g)[VPT][Vec<T>::N]) {
    constexpr int VN = Vec<T>::N;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        Vec<T> o;
#pragma unroll
        for (int e = 0; e < VN; ++e) o.v[e] = from_float<T>((g[k][e] - xh[k][e] * c) * r);
        __stwb(reinterpret_cast<uint4*>(dxr + k * THREADS * VN),
               *reinterpret_cast<const uint4*>(&o));
    }
}

// This thread's weights (all 1 without a weight: load_weights) from w, already offset to the
// thread's first column, and its dw sums zeroed.
template <typename W, int THREADS, int VPT, int VN>
__device__ __forceinline__ void tile_open(const W* w, float (&wf)[VPT][VN], float (&acc)[VPT][VN]) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        load_weights(w, static_cast<long long>(k) * THREADS * VN, wf[k]);
#pragma unroll
        for (int e = 0; e < VN; ++e) acc[k][e] = 0.0f;
    }
}

// The block's dw sums as its row of dw_part (reduce_dw adds the rows in a fixed order).
template <int THREADS, int VPT, int VN>
__device__ __forceinline__ void tile_close(float* out, const float (&acc)[VPT][VN]) {
#pragma unroll
    for (int k = 0; k < VPT; ++k)
#pragma unroll
        for (int c = 0; c < VN; c += 4)
            *reinterpret_cast<float4*>(out + k * THREADS * VN + c) =
                make_float4(acc[k][c], acc[k][c + 1], acc[k][c + 2], acc[k][c + 3]);
}
// --8<-- [end:backward_tile_parts]

// --8<-- [start:backward_ring]
// The warp-per-row backward with its next rows already on their way. rmsnorm_bwd_rows has one
// row per warp in flight at most: a warp asks for its row, waits for it, sums, writes dx, and
// only then asks for the next, so between its rows it has nothing to read. Here each warp owns
// a ring of S shared-memory stages and copies row i + S - 1 into it (cp.async, past L1) before
// it works on row i: S - 1 rows per warp are always on their way while it computes. Each lane
// copies and reads back only its own vectors (lane l: vectors l, l + 32, ..., K of them per
// tensor, as in rmsnorm_bwd_rows), so cp.async's wait orders a lane's copies before its own
// reads, and no barrier or warp sync guards the ring. The row's rstd rides along in registers,
// loaded when its copies are issued. The weights are copied into shared memory once (ahead of
// the ring), the dx and dw arithmetic and the end (rows_dw_finish) are rmsnorm_bwd_rows's, so
// dx has the same bits; dx goes out with plain 16-byte stores (__stwb), as tile_give writes it,
// where rmsnorm_bwd_rows streams it (labs/probe_rmsnorm_backward_stores.py races the two).
// Dynamic shared memory: the weights (n W's, rounded up to 16 bytes),
// then WARPS x S stages of 2 x 32 K vectors (ring_smem_bytes on the host).
template <typename T, typename W, int K, int WARPS, int S>
__device__ __forceinline__ void rmsnorm_bwd_ring(const T* dy, const T* x, const W* w,
                                                 const float* rstd, T* dx, float* dw_part,
                                                 W* dw, unsigned* bar, long long m, int nvec) {
    static_assert(S >= 2, "a ring of one stage has nothing in flight ahead of the warp");
    constexpr int V = Vec<T>::N;
    constexpr int THREADS = WARPS * 32;
    constexpr int STAGE = 2 * 32 * K;  // 16-byte vectors per stage: x's, then dy's
    extern __shared__ __align__(16) uint4 ring_smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const long long n = static_cast<long long>(nvec) * V;
    const int wvec = static_cast<int>((n * static_cast<long long>(sizeof(W)) + 15) / 16);
    if (w) {
        for (int i = threadIdx.x; i < wvec; i += THREADS)
            ring_smem[i] = __ldg(reinterpret_cast<const uint4*>(w) + i);
    }
    __syncthreads();  // the weights are in place (the only barrier before the end)
    const W* ws = reinterpret_cast<const W*>(ring_smem);
    uint4* ring = ring_smem + wvec + warp * (S * STAGE) + lane;
    const long long stride = static_cast<long long>(gridDim.x) * WARPS;
    const long long first = static_cast<long long>(blockIdx.x) * WARPS + warp;
    // Row `row`'s vectors of x and dy into stage `slot`, closed as one group of copies (an
    // empty group past the last row, so that every iteration waits for the same count).
    auto issue = [&](long long row, int slot) {
        if (row < m) {
            const T* xr = x + row * n;
            const T* dr = dy + row * n;
            uint4* st = ring + slot * STAGE;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int i = lane + 32 * k;
                if (i < nvec) {
                    cp_async16_l2(st + 32 * k, xr + static_cast<long long>(i) * V);
                    cp_async16_l2(st + 32 * (K + k), dr + static_cast<long long>(i) * V);
                }
            }
        }
        cp_async_commit();
    };
    float rq[S];  // rstd of the rows in the ring, oldest first
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        const long long row = first + s * stride;
        rq[s] = row < m ? rstd[row] : 0.0f;
        issue(row, s);
    }
    float acc[K][V];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[k][e] = 0.0f;
    int slot = 0;
    for (long long row = first; row < m; row += stride) {
        const long long ahead = row + (S - 1) * stride;
        issue(ahead, slot == 0 ? S - 1 : slot - 1);  // the stage row - stride used
        rq[S - 1] = ahead < m ? rstd[ahead] : 0.0f;
        cp_async_wait_groups<S - 1>();  // this lane's copies of `row` have landed
        const float r = rq[0];
#pragma unroll
        for (int s = 0; s < S - 1; ++s) rq[s] = rq[s + 1];
        const uint4* st = ring + slot * STAGE;
        float dot = 0.0f;  // this lane's share of sum_j dy_j w_j x_j
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = lane + 32 * k;
            if (i < nvec) {
                const Vec<T> xv = *reinterpret_cast<const Vec<T>*>(st + 32 * k);
                const Vec<T> dv = *reinterpret_cast<const Vec<T>*>(st + 32 * (K + k));
                float wf[V];
                staged_weights<W, V>(w, ws + static_cast<long long>(i) * V, wf);
#pragma unroll
                for (int e = 0; e < V; ++e) dot += to_float(dv.v[e]) * wf[e] * to_float(xv.v[e]);
            }
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        const float coef = dot * r * r * r / static_cast<float>(n);
        T* dxr = dx + row * n;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = lane + 32 * k;
            if (i < nvec) {
                const Vec<T> xv = *reinterpret_cast<const Vec<T>*>(st + 32 * k);
                const Vec<T> dv = *reinterpret_cast<const Vec<T>*>(st + 32 * (K + k));
                float wf[V];
                staged_weights<W, V>(w, ws + static_cast<long long>(i) * V, wf);
                const Vec<T> o = dx_and_dw<T, V>(xv, dv, wf, r, coef, acc[k]);
                __stwb(reinterpret_cast<uint4*>(dxr + static_cast<long long>(i) * V),
                       *reinterpret_cast<const uint4*>(&o));
            }
        }
        slot = slot == S - 1 ? 0 : slot + 1;
    }
    cp_async_wait_groups<0>();  // the empty groups past the last row
    if (!dw_part) return;  // the same for every thread: no barrier is skipped by some only
    __syncthreads();  // every warp is done with its ring: it holds the dw sums from here
    rows_dw_finish<W, K, V, THREADS>(acc, reinterpret_cast<float*>(ring_smem), dw_part, dw, bar,
                                     n, nvec);
}

#define RMSNORM_BWD_RING_ENTRY(SUFFIX, T, W, WSUFFIX, K, WARPS, S)                              \
    extern "C" __global__ void __launch_bounds__(WARPS * 32, 1)                                \
        rmsnorm_bwd_ring_k##K##_w##WARPS##_s##S##_##SUFFIX##WSUFFIX(                            \
            const T* dy, const T* x, const W* w, const float* rstd, T* dx, float* dw_part,     \
            W* dw, unsigned* bar, long long m, int nvec) {                                     \
        rmsnorm_bwd_ring<T, W, K, WARPS, S>(dy, x, w, rstd, dx, dw_part, dw, bar, m, nvec);    \
    }
#define RMSNORM_BWD_RING(K, WARPS, S)                                                           \
    RMSNORM_BWD_RING_ENTRY(f32, float, float, , K, WARPS, S)                                   \
    RMSNORM_BWD_RING_ENTRY(f32, float, float, _wf32, K, WARPS, S)                              \
    RMSNORM_BWD_RING_ENTRY(f16, mk_half, mk_half, , K, WARPS, S)                               \
    RMSNORM_BWD_RING_ENTRY(f16, mk_half, float, _wf32, K, WARPS, S)                            \
    RMSNORM_BWD_RING_ENTRY(bf16, mk_bf16, mk_bf16, , K, WARPS, S)                              \
    RMSNORM_BWD_RING_ENTRY(bf16, mk_bf16, float, _wf32, K, WARPS, S)
// What plan_bwd_rows launches on sm_90 (ROWS_BWD_RING in __init__.py).
RMSNORM_BWD_RING(4, 12, 4)
RMSNORM_BWD_RING(8, 8, 3)
// --8<-- [end:backward_ring]

// --8<-- [start:backward_tile]
// The fp32 backward for rows of exactly THREADS x VPT vectors (4096, 8192 and 16384 elements:
// plan_bwd_tile), written to issue as few instructions per element as QuACK's, which the lab's
// ncu at 8192 fp32 found at half of Triton's count and of rmsnorm_bwd's. What differs from
// rmsnorm_bwd:
//   - the row length is a compile-time constant: no bounds checks on any vector, and every
//     offset inside a row is an immediate from one 64-bit row pointer;
//   - the registers hold xhat = x * r and g = dy * w, not x and dy: six FP operations per
//     element (xhat, g, the sum g * xhat, dw += dy * xhat, dx = (g - xhat * c) * r);
//   - one block per row at a time, its sum reduced with one barrier (the warps' partials in a
//     slot per row parity, so the next row's writes cannot meet this row's reads);
//   - the next row's copies issued as soon as this row is in registers: each thread copies and
//     reads only its own vectors, so one buffer suffices and the registers are the second stage.
// dx = r * (g - xhat * c), c = sum(g * xhat) / N (the same as dx = r g - x r^3 / N sum(g x)).
// WREG: the weights in registers, or (512 threads x 8 vectors, where registers run out) in
// shared memory after the row buffers, each thread's own vectors.
template <int THREADS, int VPT, bool WREG>
__device__ __forceinline__ void rmsnorm_bwd_tile(const float* dy, const float* x, const float* w,
                                                 const float* rstd, float* dx, float* dw_part,
                                                 long long m) {
    constexpr int NVEC = THREADS * VPT;  // vectors per row
    constexpr int N = NVEC * 4;
    constexpr int WARPS = THREADS / 32;
    extern __shared__ __align__(16) unsigned char tile_smem[];
    uint4* xs = reinterpret_cast<uint4*>(tile_smem) + threadIdx.x;  // [3][NVEC]: x, dy, w
    uint4* ds = xs + NVEC;
    float4* ws = reinterpret_cast<float4*>(ds + NVEC);
    __shared__ float partial[2][WARPS];
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int rows_n = static_cast<int>(m);  // the host keeps m under 2^31 rows
    const int step = gridDim.x;
    auto prefetch = [&](int row) {
        if (row < rows_n) {
            const long long at = static_cast<long long>(row) * N + tid * 4;
            tile_copy<float, THREADS, VPT>(xs, ds, x + at, dy + at);
        }
        cp_async_commit();
    };
    float4 wf[WREG ? VPT : 1];
    float acc[VPT][4];
    {
        float wv[VPT][4];
        tile_open<float, THREADS, VPT, 4>(w ? w + tid * 4 : nullptr, wv, acc);
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const float4 v = make_float4(wv[k][0], wv[k][1], wv[k][2], wv[k][3]);
            if (WREG) wf[WREG ? k : 0] = v;
            else ws[k * THREADS] = v;
        }
    }
    auto weight = [&](int k, float (&wk)[4]) {
        const float4 v = WREG ? wf[WREG ? k : 0] : ws[k * THREADS];
        wk[0] = v.x, wk[1] = v.y, wk[2] = v.z, wk[3] = v.w;
    };
    int row = blockIdx.x;
    prefetch(row);
    for (unsigned parity = 0; row < rows_n; row += step, parity ^= 1) {
        // Loaded here, not a row ahead: its latency hides behind the wait for the copies, and
        // no register has to carry it through the row.
        const float r = __ldg(rstd + row);
        cp_async_wait_groups<0>();
        float xh[VPT][4], g[VPT][4];
        float dot = tile_take<float, THREADS, VPT>(xs, ds, r, weight, xh, g, acc);
        prefetch(row + step);  // this thread's vectors of the buffers are in registers
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (lane == 0) partial[parity][warp] = dot;
        __syncthreads();  // every warp's partial of this row is in its slot
        float total = 0.0f;
#pragma unroll
        for (int i = 0; i < WARPS; ++i) total += partial[parity][i];  // same order everywhere
        tile_give<float, THREADS, VPT>(dx + static_cast<long long>(row) * N + tid * 4,
                                       total / static_cast<float>(N), r, xh, g);
    }
    if (dw_part)
        tile_close<THREADS, VPT, 4>(dw_part + static_cast<long long>(blockIdx.x) * N + tid * 4, acc);
}

// Dynamic shared memory: (WREG ? 2 : 3) * THREADS * VPT * 16 bytes.
#define RMSNORM_BWD_TILE(THREADS, VPT, WREG)                                                   \
    extern "C" __global__ void __launch_bounds__(THREADS)                                      \
        rmsnorm_bwd_tile_t##THREADS##_v##VPT##_w##WREG##_f32_wf32(                             \
            const float* dy, const float* x, const float* w, const float* rstd, float* dx,     \
            float* dw_part, long long m) {                                                     \
        rmsnorm_bwd_tile<THREADS, VPT, WREG>(dy, x, w, rstd, dx, dw_part, m);                  \
    }
RMSNORM_BWD_TILE(256, 4, 1)  // 4096 fp32: 32 KB of shared memory (a row of x and of dy)
RMSNORM_BWD_TILE(512, 4, 1)  // 8192 fp32: 64 KB
RMSNORM_BWD_TILE(512, 8, 0)  // 16384 fp32: 192 KB (the weights too: 128 registers per thread)
// --8<-- [end:backward_tile]

// --8<-- [start:backward_tile_cluster]
// The same backward for rows longer than one block holds (32768 to 131072 elements, fp32 or
// 16-bit), split over a cluster: block `rank` owns columns [rank * NB, (rank + 1) * NB) of every
// row the cluster visits, laid out as in rmsnorm_bwd_tile (one buffer, the weights in registers,
// every element in fp32 from the load to the store of dx, rounded once to T there). The
// row's sum is exchanged between the blocks as in rmsnorm_bwd: every warp pushes its partial
// into a slot of every block of the cluster, and each block folds all the slots in one order.
//
// Two rows in flight. Waiting for the exchange at every row left the long fp32 rows at about
// 0.86 of the copy ceiling in a side probe on the H200, fewer instructions or not; so the
// kernel takes row i + 1 (its copies waited for, its sum pushed) before it waits for row i's
// sum and gives row i's dx: one row's exchange hides behind the next row's loads and sums. The
// registers hold xh and g of both rows, which is why one block of 256 threads per SM (255
// registers each) and clusters of 4 to 16 of them.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// Row sums in flight between the blocks of a cluster. RowExchange (cluster.cuh) has two sets of
// slots, enough when a block waits for each visit before it pushes the next; with two visits
// outstanding, visit k uses set k % 4 and waits for phase k / 4 of its mbarrier (parity
// (k / 4) % 2). Four sets are enough: a block pushes visit k + 4 only after it has waited for
// visit k + 2 (it gives row k + 2 before it takes row k + 4); that wait needs every warp of the
// cluster to have pushed visit k + 2, which a warp does only after it has folded visit k, so
// set k % 4 is free in every block, and its mbarrier's phase for visit k is complete.
constexpr int PIPE_SETS = 4;
template <int WARPS, int CLUSTER> struct PipeExchange {
    unsigned long long full[PIPE_SETS];           // the mbarriers (8-byte aligned: first)
    float slot[PIPE_SETS][1][WARPS * CLUSTER];  // set, value, warp * CLUSTER + rank
};

template <int WARPS, int CLUSTER>
__device__ __forceinline__ void pipe_exchange_open(PipeExchange<WARPS, CLUSTER>& xch) {
    if (threadIdx.x == 0) {
#pragma unroll
        for (int b = 0; b < PIPE_SETS; ++b)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&xch.full[b]))
                         : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    // Every block's mbarriers are set up before any block pushes into them.
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Visit k: this warp's partial into its slot of every block (thread 0 arms this block's
// mbarrier for the bytes of all the cluster's warps).
template <int WARPS, int CLUSTER>
__device__ __forceinline__ void pipe_push(PipeExchange<WARPS, CLUSTER>& xch, int k, float v) {
    const int set = k % PIPE_SETS;
    const unsigned bar = smem_u32(&xch.full[set]);
    if (threadIdx.x == 0) {
        constexpr unsigned bytes = WARPS * CLUSTER * sizeof(float);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                     : "memory");
    }
    const float vals[1] = {v};
    push_to_cluster<1, WARPS * CLUSTER, CLUSTER>(xch.slot[set],
                                                 (threadIdx.x >> 5) * CLUSTER + cluster_rank(),
                                                 bar, vals);
}

// Visit k's total, the same bits in every thread of the cluster.
template <int WARPS, int CLUSTER>
__device__ __forceinline__ float pipe_wait(PipeExchange<WARPS, CLUSTER>& xch, int k) {
    const int set = k % PIPE_SETS;
    mbarrier_wait_parity(smem_u32(&xch.full[set]), (k / PIPE_SETS) & 1);
    float total[1] = {0.0f};
    fold_slots(xch.slot[set], total, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
    return total[0];
}

template <typename T, typename W, int THREADS, int VPT, int CLUSTER>
__device__ __forceinline__ void rmsnorm_bwd_tile_cluster(const T* dy, const T* x, const W* w,
                                                         const float* rstd, T* dx,
                                                         float* dw_part, long long m) {
    constexpr int VN = Vec<T>::N;          // elements per 16-byte vector
    constexpr int NB = THREADS * VPT * VN;  // elements per block and row
    constexpr int N = NB * CLUSTER;
    extern __shared__ __align__(16) unsigned char tile_smem[];
    __shared__ PipeExchange<THREADS / 32, CLUSTER> xch;
    const int tid = threadIdx.x;
    uint4* xs = reinterpret_cast<uint4*>(tile_smem) + tid;  // [2][THREADS * VPT]: x, dy
    uint4* ds = xs + THREADS * VPT;
    const int rows_n = static_cast<int>(m);  // the host keeps m under 2^31 rows
    const int step = gridDim.x / CLUSTER;
    const int col = static_cast<int>(cluster_rank()) * NB + tid * VN;  // this thread's first
    auto prefetch = [&](int row) {
        if (row < rows_n) {
            const long long at = static_cast<long long>(row) * N + col;
            tile_copy<T, THREADS, VPT>(xs, ds, x + at, dy + at);
        }
        cp_async_commit();
    };
    float wf[VPT][VN], acc[VPT][VN];
    tile_open<W, THREADS, VPT, VN>(w ? w + col : nullptr, wf, acc);
    auto weight = [&](int k, float (&wk)[VN]) {
#pragma unroll
        for (int e = 0; e < VN; ++e) wk[e] = wf[k][e];
    };
    pipe_exchange_open(xch);
    // Row `row`: its copies waited for, xh, g and the dw sums, the next copies started (the
    // registers took the buffers), this warp's part of its sum pushed as visit k.
    auto take = [&](int row, int k, float r, float (&xh)[VPT][VN], float (&g)[VPT][VN]) {
        cp_async_wait_groups<0>();
        float dot = tile_take<T, THREADS, VPT>(xs, ds, r, weight, xh, g, acc);
        prefetch(row + step);
        float v[1] = {dot};
        warp_merge(v, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });
        pipe_push(xch, k, v[0]);
    };
    auto give = [&](int row, int k, float r, const float (&xh)[VPT][VN], const float (&g)[VPT][VN]) {
        const float c = pipe_wait(xch, k) / static_cast<float>(N);
        tile_give<T, THREADS, VPT>(dx + static_cast<long long>(row) * N + col, c, r, xh, g);
    };
    // Two rows per trip, so which registers hold which row is known at compile time: a row's
    // xh and g live in (xa, ga) or (xb, gb), taken one visit before they are given.
    float xa[VPT][VN], ga[VPT][VN], xb[VPT][VN], gb[VPT][VN];
    int row = blockIdx.x / CLUSTER;
    float ra = 0.0f, rb = 0.0f;
    prefetch(row);
    if (row < rows_n) {
        ra = __ldg(rstd + row);
        take(row, 0, ra, xa, ga);
    }
    for (int k = 0; row < rows_n; k += 2) {
        const int r1 = row + step;
        if (r1 < rows_n) {
            rb = __ldg(rstd + r1);
            take(r1, k + 1, rb, xb, gb);
        }
        give(row, k, ra, xa, ga);
        if (r1 >= rows_n) break;
        const int r2 = r1 + step;
        if (r2 < rows_n) {
            ra = __ldg(rstd + r2);
            take(r2, k + 2, ra, xa, ga);
        }
        give(r1, k + 1, rb, xb, gb);
        row = r2;
    }
    // Every push into this block's slots has landed: it waited for every visit it took, and
    // the cluster's blocks visit the same rows. So it may exit without a cluster barrier.
    if (dw_part)
        tile_close<THREADS, VPT, VN>(dw_part + static_cast<long long>(blockIdx.x / CLUSTER) * N + col, acc);
}

// Dynamic shared memory: 2 * THREADS * VPT * 16 bytes (a block's slice of x and of dy).
#define RMSNORM_BWD_TILE_C_ENTRY(SUFFIX, T, W, WSUFFIX, THREADS, VPT, CLUSTER)                 \
    extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)      \
        rmsnorm_bwd_tile_cluster_t##THREADS##_v##VPT##_c##CLUSTER##_##SUFFIX##WSUFFIX(                 \
            const T* dy, const T* x, const W* w, const float* rstd, T* dx, float* dw_part,     \
            long long m) {                                                                     \
        rmsnorm_bwd_tile_cluster<T, W, THREADS, VPT, CLUSTER>(dy, x, w, rstd, dx, dw_part, m); \
    }
// fp32 (with an fp32 weight or none): blocks of 256 threads x 8 vectors, 8192 elements.
#define RMSNORM_BWD_TILE_C(THREADS, VPT, CLUSTER)                                              \
    RMSNORM_BWD_TILE_C_ENTRY(f32, float, float, _wf32, THREADS, VPT, CLUSTER)
// 16-bit (a weight of the same dtype, an fp32 one, or none): 256 threads x 4 vectors, also
// 8192 elements per block and the same registers.
#define RMSNORM_BWD_TILE_C16(THREADS, VPT, CLUSTER)                                            \
    RMSNORM_BWD_TILE_C_ENTRY(bf16, mk_bf16, mk_bf16, , THREADS, VPT, CLUSTER)                  \
    RMSNORM_BWD_TILE_C_ENTRY(bf16, mk_bf16, float, _wf32, THREADS, VPT, CLUSTER)               \
    RMSNORM_BWD_TILE_C_ENTRY(f16, mk_half, mk_half, , THREADS, VPT, CLUSTER)                   \
    RMSNORM_BWD_TILE_C_ENTRY(f16, mk_half, float, _wf32, THREADS, VPT, CLUSTER)
RMSNORM_BWD_TILE_C(256, 8, 4)    // 32768 fp32: 64 KB per block
RMSNORM_BWD_TILE_C(256, 8, 8)    // 65536 fp32
RMSNORM_BWD_TILE_C(256, 8, 16)   // 131072 fp32 (a "non-portable" cluster size: sm_90 runs it)
RMSNORM_BWD_TILE_C16(256, 4, 4)  // 32768 16-bit: 32 KB per block
RMSNORM_BWD_TILE_C16(256, 4, 8)  // 65536 16-bit
RMSNORM_BWD_TILE_C16(256, 4, 16) // 131072 16-bit
#endif  // __CUDA_ARCH__ >= 900
// --8<-- [end:backward_tile_cluster]

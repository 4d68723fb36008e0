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
// stages its slice in shared memory, every warp pushes its (m, sum of exp) to every block of the
// cluster, where they are merged (the online softmax merge; ClusterExchange in cluster.cuh,
// no barrier), and each block writes its slice of the gradient from shared memory. DRAM traffic is the byte model's
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
// minikernel: max-registers 64 (fp32 blocks of 512 threads take 58: 256-thread blocks at up to
// 64 registers x 3 blocks still fit an SM's 65536, so the three blocks that shared memory allows
// per SM stay resident)
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

// The summary that rows spanning a cluster exchange, per warp: a Part (m, s, xt) and, with label
// smoothing, d = sum of (x - shift) over its logits and n = how many there are, shift being m
// (or 0 when m is -inf). Merging b into a moves both d's to the common shift. Symmetric bit for
// bit like merge, so that exchange_fold's butterfly leaves every lane the same.
template <int NF> __device__ __forceinline__ void merge_into(float (&a)[NF], const float (&b)[NF]) {
    const Part p = merge({a[0], a[1], a[2]}, {b[0], b[1], b[2]});
    if constexpr (NF == 5) {
        const float sh = p.m == MK_NEG_INF ? 0.f : p.m;
        const float da = a[4] != 0.f ? fmaf(a[4], (a[0] == MK_NEG_INF ? 0.f : a[0]) - sh, a[3]) : 0.f;
        const float db = b[4] != 0.f ? fmaf(b[4], (b[0] == MK_NEG_INF ? 0.f : b[0]) - sh, b[3]) : 0.f;
        a[3] = da + db;
        a[4] = a[4] + b[4];
    }
    a[0] = p.m;
    a[1] = p.s;
    a[2] = p.xt;
}

// A thread's summary {m, s, xt[, d, n]} merged over the warp (every lane gets it), pushed to every
// block of the cluster and merged there: the row's summary, in every thread of the cluster.
template <int NF, int WARPS, int CLUSTER>
__device__ __forceinline__ void cluster_merge(ClusterExchange<NF, WARPS, CLUSTER>& xch,
                                              float (&a)[NF]) {
    warp_merge(a, [](float (&u)[NF], const float (&v)[NF]) { merge_into(u, v); });
    exchange_push(xch, a);
#pragma unroll
    for (int j = 0; j < NF; ++j) a[j] = j == 0 ? MK_NEG_INF : 0.f;
    exchange_fold(xch, a, [](float (&u)[NF], const float (&v)[NF]) { merge_into(u, v); });
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
    // per warp: max, sum of exp, x[tgt] or 0; with smoothing also sum of (x - max) and a count
    __shared__ ClusterExchange<SMOOTH ? 5 : 3, THREADS / 32, CLUSTER> xch;
    const int tid = threadIdx.x;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    if (CLUSTER > 1) exchange_open(xch);  // before the loads: the barrier's wait comes later
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

    // 3. one (max, sum, x[tgt]) per row. Rows that span a cluster push one per warp to every
    // block (ClusterExchange, cluster.cuh), label smoothing's sum riding along; one-block rows
    // merge within the block, and smoothing pays a second reduction there.
    Part r;
    float shift;
    if constexpr (CLUSTER > 1) {
        float a[SMOOTH ? 5 : 3];
        a[0] = m;
        a[1] = se;
        a[2] = xt;
        if constexpr (SMOOTH) {  // this thread's sum of (x - shift_t), and its element count
            a[3] = sd;
            a[4] = static_cast<float>(
                (s.count > tid ? (s.count - tid + THREADS - 1) / THREADS : 0) * VN +
                (tid < n_edge ? 1 : 0));
        }
        cluster_merge(xch, a);
        r = {a[0], a[1], a[2]};
        shift = r.m == MK_NEG_INF ? 0.f : r.m;  // a row of only -inf shifts by 0
        if constexpr (SMOOTH) sd = a[3];
    } else {
        r = block_merge({m, se, xt}, scratch);
        shift = r.m == MK_NEG_INF ? 0.f : r.m;
        if constexpr (SMOOTH) {
            // sum_j (x_j - m) = sum over threads of sd + n * (m_thread - m), n its element count
            const int n_t = (s.count > tid ? (s.count - tid + THREADS - 1) / THREADS : 0) * VN +
                            (tid < n_edge ? 1 : 0);
            sd = block_sum(n_t ? sd + n_t * (shift_t - shift) : 0.f, scratch);
        }
    }
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
}
// --8<-- [end:kernel]

// --8<-- [start:loss]
// The loss alone (no gradient wanted: evaluation, or a caller who asks for the loss only). Without
// a gradient to write, nothing has to wait on chip: one block per row streams it through
// registers (U vectors per thread in flight before the first is used), each thread keeping a
// running (max, sum of exp), the online softmax, rescaled once per U vectors rather than once
// per element. No shared memory is staged, so an SM holds as many blocks as its registers allow
// and DRAM sees one read of each logit: T * V * b bytes. x[tgt] is read once more, by the
// thread that streamed it, from L2. The host launches 128 threads per block: a probe on the
// H200 measured 128 and 256 within noise of each other and 512 slower, and one block per row
// ahead of splitting the row over a cluster (which this kernel therefore does not do).
//
// With reduction 'sum' or 'mean' the kernel also reduces the batch, so that the whole forward
// pass is this one launch (and a memset of its counters) instead of six: see reduce_batch.
template <typename T, int THREADS>
__device__ __forceinline__ void reduce_batch(const float* loss, const long long* target,
                                             long long rows, long long ignore_index, int mode,
                                             T* total, unsigned* tickets, float* partial,
                                             float* scratch);

template <typename T, int THREADS, int U, bool SMOOTH>
__device__ __forceinline__ void cross_entropy_loss1(const T* x, long long stride_x,
                                                    const long long* target, float* loss,
                                                    float* stats, long long V,
                                                    long long ignore_index, float smoothing,
                                                    int mode, T* total, unsigned* tickets,
                                                    float* partial) {
    constexpr int VN = Vec<T>::N;
    __shared__ float scratch[99];
    const int tid = threadIdx.x;
    const long long row = blockIdx.x;
    const T* xr = x + row * stride_x;
    const RowSplit sp = split_row(xr, V);
    const T* xb = xr + sp.head;
    const long long count = sp.nvec;
    const int n_edge = sp.head + sp.tail;
    const long long tgt = target[row];  // not waited for until the row has streamed

    float m = MK_NEG_INF, se = 0.f, sx = 0.f;  // sx: sum of x, for label smoothing
    long long i = tid;
    for (; i + (U - 1) * THREADS < count; i += U * THREADS) {
        Vec<T> v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = load_vec(xb + (i + u * THREADS) * VN);
        float mu = m;
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int k = 0; k < VN; ++k) mu = fmaxf(mu, to_float(v[u].v[k]));
        }
        const float shift = mu == MK_NEG_INF ? 0.f : mu;
        se *= __expf(m - shift);  // m = -inf (nothing yet): exp(-inf) = 0, and se is 0 anyway
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int k = 0; k < VN; ++k) {
                const float f = to_float(v[u].v[k]);
                se += __expf(f - shift);
                if (SMOOTH) sx += f;
            }
        }
        m = mu;
    }
    for (; i < count; i += THREADS) {  // fewer than U vectors left for this thread
        const Vec<T> v = load_vec(xb + i * VN);
        float mu = m;
#pragma unroll
        for (int k = 0; k < VN; ++k) mu = fmaxf(mu, to_float(v.v[k]));
        const float shift = mu == MK_NEG_INF ? 0.f : mu;
        se *= __expf(m - shift);
#pragma unroll
        for (int k = 0; k < VN; ++k) {
            const float f = to_float(v.v[k]);
            se += __expf(f - shift);
            if (SMOOTH) sx += f;
        }
        m = mu;
    }
    long long e_idx;
    const float e = edge_value(xr, sp, tid, n_edge, e_idx);
    if (tid < n_edge) {
        const float mu = fmaxf(m, e);
        const float shift = mu == MK_NEG_INF ? 0.f : mu;
        se = se * __expf(m - shift) + __expf(e - shift);
        if (SMOOTH) sx += e;
        m = mu;
    }
    if (tgt == ignore_index) {  // the whole block takes this branch together
        if (tid == 0) {
            loss[row] = 0.f;
            stats[2 * row] = 0.f;
            stats[2 * row + 1] = 0.f;
        }
        if (mode)
            reduce_batch<T, THREADS>(loss, target, gridDim.x, ignore_index, mode, total, tickets,
                                     partial, scratch);
        return;
    }
    const bool in_range = tgt >= 0 && tgt < V;
    float xt = 0.f;
    if (tgt >= sp.head && tgt < sp.head + count * VN && ((tgt - sp.head) / VN) % THREADS == tid) {
        xt = to_float(xr[tgt]);  // this thread streamed that vector: an L2 (or L1) hit
    }
    if (tid < n_edge && e_idx == tgt) xt = e;

    const Part r = block_merge({m, se, xt}, scratch);
    const float shift = r.m == MK_NEG_INF ? 0.f : r.m;  // a row of only -inf shifts by 0
    float sd = 0.f;  // sum over the row of (x - shift), for label smoothing
    if (SMOOTH) {
        const long long n_t = (count > tid ? (count - tid + THREADS - 1) / THREADS : 0) * VN +
                              (tid < n_edge ? 1 : 0);
        sd = block_sum(n_t ? sx - static_cast<float>(n_t) * shift : 0.f, scratch);
    }
    if (tid == 0) {
        const float x_t = in_range ? r.xt : __int_as_float(0x7fc00000);
        const float log_s = __logf(r.s);
        float l = log_s + (1.f - smoothing) * (shift - x_t);
        if (SMOOTH) l -= smoothing / static_cast<float>(V) * sd;
        loss[row] = l;
        stats[2 * row] = shift;
        stats[2 * row + 1] = log_s;
    }
    if (mode)
        reduce_batch<T, THREADS>(loss, target, gridDim.x, ignore_index, mode, total, tickets, partial,
                                 scratch);
}

// The batch's loss without another launch (mode 1: the sum of the rows' losses; 2: their mean
// over the targets that are not ignore_index), in two levels of "the last one to finish does
// the work". Rows are taken in groups of THREADS consecutive rows. Each block, once its thread 0
// has written loss[row], takes a ticket from its group's counter; the block that draws the
// group's last ticket knows the group's losses are all written and sums them, one per thread
// (with the count of valid targets), into partial[2g], partial[2g + 1]. It then takes a ticket
// from the counter after the groups', and the block that completes the last group sums the
// groups' partials and writes the result, rounded once to T. Counters: ceil(rows / THREADS) + 1
// unsigned ints the host zeroes before the launch.
// Why two levels: a probe on the H200 with one level (the last block of the grid summing all
// rows) made the forward pass 60 us slower at 32768 rows: one block of 128 threads walking
// 32768 losses through L2, 256 dependent steps. Two levels are two rounds of loads.
// __threadfence() before a ticket makes the writes before it visible to whichever block is
// last; the last block reads them through L2 (__ldcg), where the other SMs' writes are. The
// sums run in the same order whichever block is last, so the result is deterministic. The
// valid targets are counted in fp32, exact up to 2^24 rows, as torch's
// (target != ignore_index).sum(dtype=torch.float32) is; a batch with every target ignored gives
// 0 / 0 = NaN for the mean, as torch does. The second level loops over the groups: 128 groups
// per step, one step up to 16384 rows, eight up to 131072.
template <typename T, int THREADS>
__device__ __forceinline__ void reduce_batch(const float* loss, const long long* target,
                                             long long rows, long long ignore_index, int mode,
                                             T* total, unsigned* tickets, float* partial,
                                             float* scratch) {
    __shared__ bool last;
    const int tid = threadIdx.x;
    const long long row = blockIdx.x;
    const long long g = row / THREADS, n_groups = (rows + THREADS - 1) / THREADS;
    const long long first = g * THREADS;
    const unsigned in_group = static_cast<unsigned>(rows - first < THREADS ? rows - first : THREADS);
    if (tid == 0) {
        __threadfence();
        last = atomicAdd(tickets + g, 1u) == in_group - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const long long i = first + tid;
    float s = i < rows ? __ldcg(loss + i) : 0.f;
    float n = i < rows && target[i] != ignore_index ? 1.f : 0.f;
    s = block_sum(s, scratch);
    n = block_sum(n, scratch);
    if (n_groups > 1) {
        if (tid == 0) {
            partial[2 * g] = s;
            partial[2 * g + 1] = n;
            __threadfence();
            last = atomicAdd(tickets + n_groups, 1u) == n_groups - 1;
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
        s = 0.f;
        n = 0.f;
        for (long long j = tid; j < n_groups; j += THREADS) {
            s += __ldcg(partial + 2 * j);
            n += __ldcg(partial + 2 * j + 1);
        }
        s = block_sum(s, scratch);
        n = block_sum(n, scratch);
    }
    if (tid == 0) *total = from_float<T>(mode == 2 ? s / n : s);
}
// --8<-- [end:loss]

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
#define CE_LOSS_ENTRY(SUFFIX, T, THREADS, U, SMOOTH, SM)                                        \
    extern "C" __global__ void __launch_bounds__(THREADS)                                       \
        cross_entropy_loss_kernel1_t##THREADS##_u##U##SM##_##SUFFIX(                            \
            const T* x, long long stride_x, const long long* target, float* loss, float* stats, \
            long long V, long long ignore_index, float smoothing, int mode, T* total,           \
            unsigned* tickets, float* partial) {                                                \
        cross_entropy_loss1<T, THREADS, U, SMOOTH>(x, stride_x, target, loss, stats, V,         \
                                                   ignore_index, smoothing, mode, total,        \
                                                   tickets, partial);                           \
    }
#define CE_SMOOTH(SUFFIX, T, THREADS, CLUSTER, DIMS)                                            \
    CE_ENTRY(SUFFIX, T, THREADS, CLUSTER, false, , DIMS)                                        \
    CE_ENTRY(SUFFIX, T, THREADS, CLUSTER, true, _ls, DIMS)
// What the host launches (slices.py): a row of up to 64 KB in one block of 128, 256 or 512
// threads; longer rows in clusters of 2, 4 or 8 blocks of 256 or 512 threads. The loss alone:
// one block of 128 threads per row.
#define CE_SIZES(SUFFIX, T) \
    CE_SMOOTH(SUFFIX, T, 128, 1, ) \
    CE_SMOOTH(SUFFIX, T, 256, 1, ) \
    CE_SMOOTH(SUFFIX, T, 512, 1, ) \
    CE_SMOOTH(SUFFIX, T, 256, 2, __cluster_dims__(2, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 512, 2, __cluster_dims__(2, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 256, 4, __cluster_dims__(4, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 256, 8, __cluster_dims__(8, 1, 1)) \
    CE_SMOOTH(SUFFIX, T, 512, 8, __cluster_dims__(8, 1, 1)) \
    CE_LOSS_ENTRY(SUFFIX, T, 128, 4, false, ) \
    CE_LOSS_ENTRY(SUFFIX, T, 128, 4, true, _ls)
MK_FOR_EACH_DTYPE(CE_SIZES)

#endif  // __CUDA_ARCH__ >= 900

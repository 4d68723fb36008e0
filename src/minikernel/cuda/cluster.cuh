// cluster.cuh: one row spread over the shared memory of a thread-block cluster (sm_90+).
//
// A row op (softmax, RMSNorm, cross-entropy) is fastest when it reads each element from DRAM
// exactly once: the row has to wait somewhere on chip between the reduction that needs all of
// it and the pass that writes the output. One SM has 228 KB of shared memory; a row of 131072
// bf16 values is 256 KB. A cluster (up to 8 blocks that the hardware schedules together on one
// GPC, each able to read the others' shared memory: "distributed shared memory", DSMEM) holds
// CLUSTER times more. Each block stages its own slice of the row in its shared memory, reduces
// it to a few numbers, and the blocks swap those numbers over DSMEM; nothing else crosses SMs.
//
// Slices of at most ~64 KB let three blocks share an SM, so that while one block waits at a
// barrier or writes its output, the others keep loads in flight.
#pragma once
#include "common.cuh"

#ifndef MK_NEG_INF
#define MK_NEG_INF (-__int_as_float(0x7f800000))
#endif

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

// This block's index inside its cluster (blockIdx.x % CLUSTER for a 1-D cluster).
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// The two halves of a cluster-wide barrier. arrive.release makes this thread's earlier shared
// memory writes visible to whoever waits; wait.acquire returns when every thread of every block
// of the cluster has arrived. Splitting them lets a block do useful work in between.
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ void cluster_sync() {
    cluster_arrive();
    cluster_wait();
}

// A cluster barrier for the common case where only thread 0 of each block has written what the
// other blocks will read (its partial sums). A release makes the arriving thread wait until its
// earlier memory operations are visible cluster-wide (ncu counts that wait as a `membar` stall),
// so only warp 0 pays for it; the other warps arrive relaxed, which orders nothing. `.aligned`
// promises that every thread of a warp executes the same barrier instruction (the branch is
// uniform per warp), which lets the hardware handle the warp as one.
__device__ __forceinline__ void cluster_sync_thread0() {
    if (threadIdx.x < 32) {
        asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    } else {
        asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    }
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Read the float that block `rank` of this cluster keeps at the shared-memory offset `local`
// has in our own block: mapa turns our address into theirs, ld.shared::cluster reads it.
__device__ __forceinline__ float ld_dsmem(const float* local, unsigned rank) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

// --- A cluster exchange without barriers ------------------------------------------------------
// The merge above costs, per row, a block-wide reduction (two or three __syncthreads) and a
// cluster barrier that every thread of every block must reach before any block reads a partial
// result, plus a second barrier at the end so that no block exits while another may still read
// its shared memory. ClusterExchange replaces all of that with pushes: every warp reduces its
// own values with shuffles, and lanes 0 .. CLUSTER-1 of the warp each write the warp's values
// into one block's `slot` array with st.async, an asynchronous store to another block's shared
// memory that, once it lands, credits its byte count to a transaction barrier (an mbarrier) in
// that block. Each block waits on its own mbarrier until NF * WARPS * CLUSTER floats have
// arrived, then folds them. No thread waits for another thread of its own block, nobody reads
// remote memory, and since every block waits only for what is written into it, a block may
// exit as soon as it is done. The one cluster barrier left makes sure every block's mbarrier
// is initialised before anyone pushes into it; it is split in two (exchange_open arrives
// before the row is loaded, exchange_push waits after), so the wait is normally long over.
// The slots are laid out the same way in every block, so every block folds the same values
// in the same order and gets the same bits.
template <int NF, int WARPS, int CLUSTER> struct ClusterExchange {
    unsigned long long full;         // the mbarrier (8-byte aligned: first member)
    float slot[NF][WARPS * CLUSTER]; // value f of warp w of block r at slot[f][w * CLUSTER + r]
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The address in block `rank`'s shared memory of what sits at `addr` in ours.
__device__ __forceinline__ unsigned map_to_rank(unsigned addr, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    return remote;
}

// Merge NF floats over the 32 lanes of a warp with an xor butterfly: every lane ends with the
// same bits as long as merge(a, b) == merge(b, a) bit for bit. merge(a, b) updates a in place.
template <int NF, typename Merge>
__device__ __forceinline__ void warp_merge(float (&acc)[NF], Merge&& merge) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float f[NF];
#pragma unroll
        for (int j = 0; j < NF; ++j) f[j] = __shfl_xor_sync(0xffffffffu, acc[j], o);
        merge(acc, f);
    }
}

// Lane l merges slots l, l + 32, ... into acc (which holds the identity on entry), then the
// warp merges its lanes (warp_merge).
template <int NF, int SLOTS, typename Merge>
__device__ __forceinline__ void fold_slots(const float (&slot)[NF][SLOTS], float (&acc)[NF],
                                           Merge&& merge) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < (SLOTS + 31) / 32; ++i) {
        const int k = lane + 32 * i;
        if (k < SLOTS) {
            float f[NF];
#pragma unroll
            for (int j = 0; j < NF; ++j) f[j] = slot[j][k];
            merge(acc, f);
        }
    }
    warp_merge(acc, merge);
}

// lanes 0 .. CLUSTER-1 of the warp send its NF values v to slot `index` of every block's
// `slot` array (lane r to block r), crediting each block's mbarrier at the same offset as `bar`.
template <int NF, int SLOTS, int CLUSTER>
__device__ __forceinline__ void push_to_cluster(float (&slot)[NF][SLOTS], int index, unsigned bar,
                                                const float (&v)[NF]) {
    const unsigned lane = threadIdx.x & 31;
    if (lane < CLUSTER) {
        const unsigned remote_bar = map_to_rank(bar, lane);
#pragma unroll
        for (int f = 0; f < NF; ++f) {
            const unsigned dst = map_to_rank(smem_u32(&slot[f][index]), lane);
            asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];"
                         ::"r"(dst), "f"(v[f]), "r"(remote_bar)
                         : "memory");
        }
    }
}

__device__ __forceinline__ void mbarrier_wait_parity(unsigned bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// Before the row is loaded: thread 0 sets up the mbarrier (one arrival expected: its own, with
// the byte count), fences the initialisation for the cluster, and every thread arrives at the
// cluster barrier without waiting.
template <int NF, int WARPS, int CLUSTER>
__device__ __forceinline__ void exchange_open(ClusterExchange<NF, WARPS, CLUSTER>& xch) {
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&xch.full)) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

// Every lane of every warp holds its warp's NF values in v. Returns (to every thread) when this
// block's slots hold the values of every warp of every block in the cluster.
template <int NF, int WARPS, int CLUSTER>
__device__ __forceinline__ void exchange_push(ClusterExchange<NF, WARPS, CLUSTER>& xch,
                                              const float (&v)[NF]) {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");  // all mbarriers are set
    const unsigned bar = smem_u32(&xch.full);
    if (threadIdx.x == 0) {
        constexpr unsigned bytes = NF * WARPS * CLUSTER * sizeof(float);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                     "r"(bytes)
                     : "memory");
    }
    const unsigned warp = threadIdx.x >> 5;
    push_to_cluster<NF, WARPS * CLUSTER, CLUSTER>(xch.slot, warp * CLUSTER + cluster_rank(), bar, v);
    mbarrier_wait_parity(bar, 0);  // phase 0: thread 0 has arrived and every byte has landed
}

// The fold after exchange_push: every warp merges all the slots (fold_slots), so every thread
// of every block of the cluster gets the same bits.
template <int NF, int WARPS, int CLUSTER, typename Merge>
__device__ __forceinline__ void exchange_fold(const ClusterExchange<NF, WARPS, CLUSTER>& xch,
                                              float (&acc)[NF], Merge&& merge) {
    fold_slots(xch.slot, acc, merge);
}

// --- The same exchange, once per row, for a cluster that walks many rows ----------------------
// A persistent kernel (cluster g of G takes rows g, g + G, g + 2G, ...) exchanges once per row it
// visits. RowExchange keeps two sets of slots and mbarriers and uses them in turn: visit k uses
// set k % 2 and waits for phase k / 2 of that set's mbarrier (parity (k / 2) % 2). Two sets are
// enough. A block pushes visit k + 2 into set k % 2 of block B only after its own wait for visit
// k + 1 has returned; that needs every warp of B to have pushed visit k + 1, and a warp of B
// pushes visit k + 1 only after it has folded visit k. So nothing lands in a set that B is still
// reading. Bytes of visit k + 2 may reach B before B's thread 0 arms the phase with its expected
// byte count; the mbarrier's transaction count is then negative for a while, which it allows,
// and the phase cannot complete without thread 0's arrival.
template <int NF, int WARPS, int CLUSTER> struct RowExchange {
    unsigned long long full[2];           // the two mbarriers (8-byte aligned: first member)
    float slot[2][NF][WARPS * CLUSTER];   // set, value, warp * CLUSTER + rank
};

// Once, before the first visit: every block's mbarriers are initialised before anyone pushes.
template <int NF, int WARPS, int CLUSTER>
__device__ __forceinline__ void row_exchange_open(RowExchange<NF, WARPS, CLUSTER>& xch) {
    if (threadIdx.x == 0) {
#pragma unroll
        for (int b = 0; b < 2; ++b) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&xch.full[b]))
                         : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Visit k: every lane holds its warp's NF values in v; acc (the identity on entry) gets the
// merge of every warp of every block, the same bits in every thread of the cluster.
template <int NF, int WARPS, int CLUSTER, typename Merge>
__device__ __forceinline__ void row_exchange(RowExchange<NF, WARPS, CLUSTER>& xch, int k,
                                             const float (&v)[NF], float (&acc)[NF],
                                             Merge&& merge) {
    const int set = k & 1;
    const unsigned bar = smem_u32(&xch.full[set]);
    if (threadIdx.x == 0) {
        constexpr unsigned bytes = NF * WARPS * CLUSTER * sizeof(float);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                     "r"(bytes)
                     : "memory");
    }
    const unsigned me = CLUSTER > 1 ? cluster_rank() : 0;
    push_to_cluster<NF, WARPS * CLUSTER, CLUSTER>(xch.slot[set],
                                                  (threadIdx.x >> 5) * CLUSTER + me, bar, v);
    mbarrier_wait_parity(bar, (k >> 1) & 1);
    fold_slots(xch.slot[set], acc, merge);
}

#endif  // __CUDA_ARCH__ >= 900

// --- 16-byte aligned body and scalar edges ---------------------------------------------------
// A row starts wherever row * N * sizeof(T) lands, so for most N its start is not 16-byte
// aligned. Split it into `head` scalars up to the first 16-byte boundary, `nvec` aligned 16-byte
// vectors, and `tail` scalars after them; head + tail < 2 * Vec<T>::N. The output row has the
// same split because the host passes x and y with the same address modulo 16.
struct RowSplit {
    int head;
    int tail;
    long long nvec;
};

template <typename T> __device__ __forceinline__ RowSplit split_row(const T* row, long long n) {
    constexpr int VN = Vec<T>::N;
    const int past = static_cast<int>((reinterpret_cast<unsigned long long>(row) % 16) / sizeof(T));
    long long head = past == 0 ? 0 : VN - past;
    if (head > n) head = n;
    const long long nvec = (n - head) / VN;
    return {static_cast<int>(head), static_cast<int>(n - head - nvec * VN), nvec};
}

// Index in the row of edge element e (0 <= e < head + tail).
__device__ __forceinline__ long long edge_index(const RowSplit& sp, int e, int vn) {
    return e < sp.head ? e : sp.head + sp.nvec * vn + (e - sp.head);
}

// Edge element `e` of a row (see RowSplit) when e < n_edge, with its index in `idx`; else -inf
// (which adds nothing to a max, nor exp(-inf) = 0 to a sum) and idx = 0.
template <typename T>
__device__ __forceinline__ float edge_value(const T* row, const RowSplit& sp, int e, int n_edge,
                                            long long& idx) {
    idx = 0;
    if (e >= n_edge) return MK_NEG_INF;
    idx = edge_index(sp, e, Vec<T>::N);
    return to_float(row[idx]);
}

// Copy `count` 16-byte vectors from global memory (src, 16-byte aligned) into shared memory
// (dst), then call fold(v) on every vector. Thread t copies vectors t, t + THREADS, ...: a warp
// reads 512 contiguous bytes per instruction. The copies are cp.async (sm_80+): the load goes
// straight from L2 into shared memory without passing through registers, so a thread can have
// all of its vectors in flight at once (a whole 64 KB slice per block) instead of the few that
// its registers would hold; one wait then covers them all, and a DRAM round trip is paid once
// per slice rather than once per handful of vectors. wait_all makes a thread's own copies
// visible to it, and each thread folds only the vectors it copied, so no barrier is needed
// here, nor between this and a later pass in which each thread reads back its own vectors.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;" ::: "memory");
}

template <typename T, int THREADS, typename Fold>
__device__ __forceinline__ void stage_vectors(const T* src, Vec<T>* dst, int count, Fold&& fold) {
    constexpr int VN = Vec<T>::N;
    const int tid = threadIdx.x;
#pragma unroll 4
    for (int i = tid; i < count; i += THREADS) {
        cp_async16(dst + i, src + static_cast<long long>(i) * VN);
    }
    cp_async_wait_all();
    for (int i = tid; i < count; i += THREADS) fold(dst[i]);
}

// The slice of a row's `nvec` vectors that block `rank` of a cluster owns: [first, first + count).
struct Slice {
    int first;
    int count;
};

__device__ __forceinline__ Slice slice_of(int nvec, int per_block, unsigned rank) {
    const int first = static_cast<int>(rank) * per_block;
    int count = nvec - first;
    count = count < 0 ? 0 : (count > per_block ? per_block : count);
    return {first, count};
}

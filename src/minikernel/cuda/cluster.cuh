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

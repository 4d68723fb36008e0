// vector_add.cu: out[i] = a[i] + b[i], the hello world of GPU kernels.
//
// Versions (one idea each; the registry key is cuda:N):
//   vector_add_kernel1  one element per thread, 256 threads per block
//   vector_add_kernel2  one 16-byte vector per thread (4 floats or 8 halves): a quarter (or an
//                       eighth) of the load/store instructions for the same bytes
//   vector_add_kernel3  four 16-byte vectors per thread, all loads issued before the first add:
//                       more bytes in flight per thread to cover DRAM latency
//
// Byte model: read a and b, write out = 3 * n * sizeof(T) bytes, no reuse. The kernel is
// memory-bound at any size that fills the GPU, so its speed limit is the DRAM bandwidth.
// Every dtype computes in fp32 and rounds once when storing, as PyTorch's a + b does.
#include "common.cuh"

// --------------------------------------------------------------------------------------------
// GPU kernels
// --------------------------------------------------------------------------------------------

// --8<-- [start:kernel1]
template <typename T>
__device__ __forceinline__ void vector_add1(const T* a, const T* b, T* out, long long n) {
    // Global index of this thread. 64-bit: a grid can cover more than 2^31 elements.
    long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {  // the last block usually runs past the end: those threads must do nothing
        out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
    }
}

#define VECTOR_ADD1(SUFFIX, T)                                                          \
    extern "C" __global__ void vector_add_kernel1_##SUFFIX(const T* a, const T* b, T* out, \
                                                           long long n) {               \
        vector_add1<T>(a, b, out, n);                                                    \
    }
MK_FOR_EACH_DTYPE(VECTOR_ADD1)
// --8<-- [end:kernel1]

// --8<-- [start:kernel2]
template <typename T>
__device__ __forceinline__ void vector_add2(const T* a, const T* b, T* out, long long n) {
    constexpr int N = Vec<T>::N;  // elements per 16-byte vector
    const long long n_vec = n / N;
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n_vec) {
        // One 16-byte load per input and one 16-byte store: needs 16-byte aligned pointers
        // (the host wrapper checks, and falls back to kernel1 otherwise).
        Vec<T> x = load_vec(a + i * N);
        const Vec<T> y = load_vec(b + i * N);
#pragma unroll
        for (int k = 0; k < N; ++k) x.v[k] = from_float<T>(to_float(x.v[k]) + to_float(y.v[k]));
        store_vec(out + i * N, x);
    }
    // The last n % N elements do not fill a vector: the first threads of the grid take one each.
    const long long tail = n - n_vec * N;
    if (i < tail) {
        const long long j = n_vec * N + i;
        out[j] = from_float<T>(to_float(a[j]) + to_float(b[j]));
    }
}

#define VECTOR_ADD2(SUFFIX, T)                                                          \
    extern "C" __global__ void vector_add_kernel2_##SUFFIX(const T* a, const T* b, T* out, \
                                                           long long n) {               \
        vector_add2<T>(a, b, out, n);                                                    \
    }
MK_FOR_EACH_DTYPE(VECTOR_ADD2)
// --8<-- [end:kernel2]

// --8<-- [start:kernel3]
constexpr int kUnroll = 4;  // vectors per thread

template <typename T>
__device__ __forceinline__ void vector_add3(const T* a, const T* b, T* out, long long n) {
    constexpr int N = Vec<T>::N;
    const long long n_vec = n / N;
    // A block covers kUnroll * blockDim.x consecutive vectors. Thread t takes vectors t,
    // t + blockDim.x, t + 2 * blockDim.x, ...: each load instruction of the warp still reads 32
    // consecutive vectors (512 bytes), so every access stays coalesced.
    const long long first = static_cast<long long>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x;
    Vec<T> x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // 2 * kUnroll loads of 16 B in flight per thread
        const long long i = first + static_cast<long long>(u) * blockDim.x;
        if (i < n_vec) {
            x[u] = load_vec(a + i * N);
            y[u] = load_vec(b + i * N);
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const long long i = first + static_cast<long long>(u) * blockDim.x;
        if (i < n_vec) {
#pragma unroll
            for (int k = 0; k < N; ++k) {
                x[u].v[k] = from_float<T>(to_float(x[u].v[k]) + to_float(y[u].v[k]));
            }
            store_vec(out + i * N, x[u]);
        }
    }
    // The last n % N elements: one each for the first threads of the grid, as in kernel2.
    const long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (g < n - n_vec * N) {
        const long long j = n_vec * N + g;
        out[j] = from_float<T>(to_float(a[j]) + to_float(b[j]));
    }
}

#define VECTOR_ADD3(SUFFIX, T)                                                          \
    extern "C" __global__ void vector_add_kernel3_##SUFFIX(const T* a, const T* b, T* out, \
                                                           long long n) {               \
        vector_add3<T>(a, b, out, n);                                                    \
    }
MK_FOR_EACH_DTYPE(VECTOR_ADD3)
// --8<-- [end:kernel3]

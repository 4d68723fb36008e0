// common.cuh: the few helpers every minikernel .cu file shares.
//
// It includes no CUDA header on purpose: NVRTC then compiles our kernels with no include path
// at all, on a machine with only the `nvidia-cuda-nvrtc` wheel (no toolkit), GPU or not.
// The price is that we spell out the two 16-bit float formats ourselves, which is also a
// short lesson in what they are.
#pragma once

// A half (IEEE fp16) and a bfloat16 are both 16 bits in memory. Distinct structs (not two
// typedefs of unsigned short) so that overloads can tell them apart.
struct __align__(2) mk_half { unsigned short bits; };
struct __align__(2) mk_bf16 { unsigned short bits; };

// --- conversions: every kernel loads its dtype, computes in fp32, and stores its dtype -------

__device__ __forceinline__ float to_float(float x) { return x; }

__device__ __forceinline__ float to_float(mk_half x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));  // exact: every fp16 is an fp32
    return f;
}

__device__ __forceinline__ float to_float(mk_bf16 x) {
    // A bfloat16 is the top 16 bits of an fp32 (same 8-bit exponent), so widening is a shift.
    return __uint_as_float(static_cast<unsigned int>(x.bits) << 16);
}

template <typename T> __device__ __forceinline__ T from_float(float f);

template <> __device__ __forceinline__ float from_float<float>(float f) { return f; }

template <> __device__ __forceinline__ mk_half from_float<mk_half>(float f) {
    mk_half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));  // round to nearest even
    return h;
}

template <> __device__ __forceinline__ mk_bf16 from_float<mk_bf16>(float f) {
    mk_bf16 b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));  // sm_80+; round to nearest even
    return b;
}

// --- 16-byte vectors ---------------------------------------------------------------------
// A warp moves memory fastest when each thread loads 16 bytes at once (one LDG.E.128): 4 floats
// or 8 halves. Vec<T> is that chunk, viewed as an array of T.
template <typename T> struct __align__(16) Vec {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

// Streaming load: read through L2 but do not keep the line in L1 (.cs = cache streaming);
// the data is used once.
template <typename T> __device__ __forceinline__ Vec<T> load_vec(const T* p) {
    uint4 raw = __ldcs(reinterpret_cast<const uint4*>(p));
    return *reinterpret_cast<Vec<T>*>(&raw);
}

// Plain load: the default caching (L1 and L2, normal eviction priority). Softmax's rung 11 loads
// with it: a probe on the H200 measured it faster than the .cs load there (softmax.cu says more).
template <typename T> __device__ __forceinline__ Vec<T> load_vec_plain(const T* p) {
    uint4 raw = *reinterpret_cast<const uint4*>(p);
    return *reinterpret_cast<Vec<T>*>(&raw);
}

template <typename T> __device__ __forceinline__ void store_vec(T* p, const Vec<T>& x) {
    __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&x));
}

// extern "C" entry points cannot be templates (their names are not mangled), so each .cu file
// writes one small template and stamps an extern "C" kernel per dtype with this list:
//   #define ENTRY(SUFFIX, T) extern "C" __global__ void op_kernel1_##SUFFIX(const T* x, ...) {...}
//   MK_FOR_EACH_DTYPE(ENTRY)   // op_kernel1_f32, op_kernel1_f16, op_kernel1_bf16
#define MK_FOR_EACH_DTYPE(X) X(f32, float) X(f16, mk_half) X(bf16, mk_bf16)

// matmul.cu: C = A @ B in fp32, the classic ladder from one thread per output to register tiles.
//
// A is M x K, B is K x N, C is M x N, all row-major and contiguous; any M, N, K >= 1.
// Versions (one idea each; the registry key is cuda:N):
//   matmul_kernel1  one thread per element of C; the threads of a warp take consecutive ROWS, so
//                   their loads of A and stores of C are 4*K and 4*N bytes apart: uncoalesced
//   matmul_kernel2  the same work with the threads of a warp along a row of C: their loads of B
//                   and stores of C are consecutive (coalesced), their A element is one broadcast
//   matmul_kernel3  32 x 32 tiles of A and B staged in shared memory: each element read from
//                   global memory once per tile and then 32 times from shared memory
//   matmul_kernel4  register tiles: 256 threads compute a 128 x 128 block of C, 8 x 8 outputs per
//                   thread, as outer products of 8 values of A and 8 of B held in registers:
//                   16 shared-memory loads feed 64 FMAs
//   matmul_kernel5  kernel4 + 16-byte (float4) global loads and stores, shared-memory reads laid
//                   out to be free of bank conflicts, and double buffering: the next tile is read
//                   from global memory while the current one is multiplied, one barrier per tile
//
// FLOP model: 2 * M * N * K (one multiply and one add per term of every dot product).
// Every kernel accumulates in fp32 in the order k = 0, 1, ..., K - 1 per thread (tile by tile).
// Indices into A, B and C are 64-bit: M * K can pass 2^31 long before the matrices stop fitting.
//
// minikernel: max-registers 128 (kernels 4-5 keep an 8x8 tile of accumulators plus 16 operands per thread)
#include "common.cuh"

// --------------------------------------------------------------------------------------------
// GPU kernels
// --------------------------------------------------------------------------------------------

// --8<-- [start:kernel1]
// Launch: block (32, 8), grid (ceil(M / 32), ceil(N / 8)).
extern "C" __global__ void matmul_kernel1_f32(const float* __restrict__ A,
                                              const float* __restrict__ B, float* __restrict__ C,
                                              int M, int N, int K) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;  // threadIdx.x (fastest) -> row
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + col];
        }
        C[static_cast<long long>(row) * N + col] = acc;
    }
}
// --8<-- [end:kernel1]

// --8<-- [start:kernel2]
// Launch: block (32, 8), grid (ceil(N / 32), ceil(M / 8)).
extern "C" __global__ void matmul_kernel2_f32(const float* __restrict__ A,
                                              const float* __restrict__ B, float* __restrict__ C,
                                              int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;  // threadIdx.x (fastest) -> column
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[static_cast<long long>(row) * K + k] * B[static_cast<long long>(k) * N + col];
        }
        C[static_cast<long long>(row) * N + col] = acc;
    }
}
// --8<-- [end:kernel2]

// --8<-- [start:kernel3]
constexpr int TILE = 32;

// Launch: block (32, 32), grid (ceil(N / 32), ceil(M / 32)).
extern "C" __global__ void matmul_kernel3_f32(const float* __restrict__ A,
                                              const float* __restrict__ B, float* __restrict__ C,
                                              int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Each thread copies one element of each tile; a warp copies 32 consecutive floats of a
        // row (128 bytes). Outside the matrices it writes 0, which adds nothing to the sums.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[static_cast<long long>(row) * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[static_cast<long long>(k0 + ty) * N + col] : 0.0f;
        __syncthreads();  // the whole tile is written before anyone reads it
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];  // As: one broadcast per warp; Bs: 32 distinct banks
        }
        __syncthreads();  // everyone is done reading before the next tile overwrites it
    }
    if (row < M && col < N) C[static_cast<long long>(row) * N + col] = acc;
}
// --8<-- [end:kernel3]

// --8<-- [start:kernel4]
namespace k4 {
constexpr int BM = 128, BN = 128, BK = 8;  // block tile of C, and the K step
constexpr int TM = 8, TN = 8;              // thread tile of C
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256
constexpr int PAD = 4;  // As rows are BM + 4 floats: the transposed stores hit 32 distinct banks
}  // namespace k4

// Launch: block 256, grid (ceil(N / 128), ceil(M / 128)).
extern "C" __global__ void __launch_bounds__(k4::THREADS, 2)
    matmul_kernel4_f32(const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C, int M, int N, int K) {
    using namespace k4;
    // A's tile is stored transposed (As[k][m]) so that a thread's 8 values of A for one k are
    // contiguous, like its 8 values of B.
    __shared__ __align__(16) float As[BK][BM + PAD];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN);  // this thread's columns: tx * 8 ... tx * 8 + 7
    const int ty = tid / (BN / TN);  // this thread's rows:    ty * 8 ... ty * 8 + 7
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile, 128 x 8: 4 elements per thread; 8 neighbouring threads read one 32-byte row.
#pragma unroll
        for (int i = 0; i < BM * BK / THREADS; ++i) {
            const int r = tid / BK + i * (THREADS / BK), c = tid % BK;
            const int gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[static_cast<long long>(gr) * K + gc] : 0.0f;
        }
        // B tile, 8 x 128: 4 elements per thread; a warp reads 128 consecutive bytes of a row.
#pragma unroll
        for (int i = 0; i < BK * BN / THREADS; ++i) {
            const int r = tid / BN + i * (THREADS / BN), c = tid % BN;
            const int gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[static_cast<long long>(gr) * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];  // 64 FMAs, 16 loads
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + tx * TN + j;
            if (r < M && c < N) C[static_cast<long long>(r) * N + c] = acc[i][j];
        }
    }
}
// --8<-- [end:kernel4]

// --8<-- [start:kernel5]
namespace k5 {
constexpr int BM = 128, BN = 128, BK = 8;
constexpr int THREADS = 256;
constexpr int PAD = 4;
}  // namespace k5

// Four consecutive floats from p[0..3], of which only the first `avail` exist (zeros for the
// rest). `vec`: the caller guarantees 16-byte alignment, so one LDG.128 does it when all 4 exist.
__device__ __forceinline__ float4 load4(const float* __restrict__ p, long long avail, bool vec) {
    if (vec && avail >= 4) return *reinterpret_cast<const float4*>(p);
    float4 v;
    v.x = avail > 0 ? p[0] : 0.0f;
    v.y = avail > 1 ? p[1] : 0.0f;
    v.z = avail > 2 ? p[2] : 0.0f;
    v.w = avail > 3 ? p[3] : 0.0f;
    return v;
}

// Launch: block 256, grid (ceil(N / 128), ceil(M / 128)). `vec` = 1 when K % 4 == 0,
// N % 4 == 0 and A, B, C are 16-byte aligned (every float4 then lies inside one row).
extern "C" __global__ void __launch_bounds__(k5::THREADS, 2)
    matmul_kernel5_f32(const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C, int M, int N, int K, int vec) {
    using namespace k5;
    __shared__ __align__(16) float As[2][BK][BM + PAD];  // two buffers: one read, one written
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x;
    const bool v4 = vec != 0;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    // Who copies what: one float4 of A (row a_r, columns a_c..a_c+3 of the K step) and one of B
    // (row b_r, columns b_c..b_c+3) per thread and tile.
    const int a_r = tid / 2, a_c = (tid % 2) * 4;
    const int b_r = tid / 32, b_c = (tid % 32) * 4;
    const long long a_row = row0 + a_r;
    const float* a_src = A + a_row * K + a_c;
    const float* b_src = B + static_cast<long long>(b_r) * N + col0 + b_c;
    const long long b_avail = N - (col0 + b_c);

    // This thread's 8 x 8 outputs are four 4 x 4 quadrants, 64 rows / columns apart: rows
    // ty*4 + {0..3} and 64 + ty*4 + {0..3}, columns likewise with tx. Neighbouring threads then
    // read neighbouring float4s of Bs: no two of a quarter-warp's 16-byte reads share a bank.
    const int tx = tid % 16, ty = tid / 16;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int num_tiles = (K + BK - 1) / BK;
    // Prologue: tile 0 into buffer 0.
    float4 a_next = load4(a_src, a_row < M ? K - a_c : 0, v4);
    float4 b_next = load4(b_src, b_r < K ? b_avail : 0, v4);
    As[0][a_c + 0][a_r] = a_next.x;
    As[0][a_c + 1][a_r] = a_next.y;
    As[0][a_c + 2][a_r] = a_next.z;
    As[0][a_c + 3][a_r] = a_next.w;
    *reinterpret_cast<float4*>(&Bs[0][b_r][b_c]) = b_next;
    __syncthreads();

    for (int t = 0; t < num_tiles; ++t) {
        const int cur = t & 1;
        const bool has_next = t + 1 < num_tiles;
        if (has_next) {  // issue the global loads of tile t + 1 now; they land while we compute
            const int k0 = (t + 1) * BK;
            a_next = load4(a_src + k0, a_row < M ? K - (k0 + a_c) : 0, v4);
            b_next = load4(b_src + static_cast<long long>(k0) * N, k0 + b_r < K ? b_avail : 0, v4);
        }
        // Unrolled by 2, not 8: a full unroll lets the compiler hoist the shared-memory loads
        // of later steps, which needs more than 128 registers (and spills) on sm_90.
#pragma unroll 2
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        if (has_next) {
            // The other buffer was last read in iteration t - 1, which every thread finished
            // before the barrier that ended it: writing it now races with nobody.
            const int nxt = cur ^ 1;
            As[nxt][a_c + 0][a_r] = a_next.x;
            As[nxt][a_c + 1][a_r] = a_next.y;
            As[nxt][a_c + 2][a_r] = a_next.z;
            As[nxt][a_c + 3][a_r] = a_next.w;
            *reinterpret_cast<float4*>(&Bs[nxt][b_r][b_c]) = b_next;
        }
        __syncthreads();  // tile t + 1 is complete, and nobody reads tile t any more
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = row0 + (i / 4) * 64 + ty * 4 + (i % 4);
        if (r >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int c = col0 + h * 64 + tx * 4;
            float* dst = C + static_cast<long long>(r) * N + c;
            const float4 out = make_float4(acc[i][h * 4 + 0], acc[i][h * 4 + 1], acc[i][h * 4 + 2],
                                           acc[i][h * 4 + 3]);
            if (v4 && c + 3 < N) {
                *reinterpret_cast<float4*>(dst) = out;
            } else {
                if (c + 0 < N) dst[0] = out.x;
                if (c + 1 < N) dst[1] = out.y;
                if (c + 2 < N) dst[2] = out.z;
                if (c + 3 < N) dst[3] = out.w;
            }
        }
    }
}
// --8<-- [end:kernel5]

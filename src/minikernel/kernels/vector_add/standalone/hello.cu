// hello.cu: vector add as a whole CUDA program, built with plain nvcc.
//
//   nvcc -arch=sm_90 -I ../../../cuda -o hello hello.cu
//   (-arch: sm_90 for H100/H200, sm_120 for RTX 50xx, sm_89 for RTX 40xx; -I finds common.cuh)
//   ./hello 1000003
//
// It includes the very kernels the Python package launches through NVRTC, and does by hand what
// minikernel.cuda.loader does for us: allocate, copy in, launch, check errors, copy out, compare.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../vector_add.cu"

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t err_ = (call);                                                       \
        if (err_ != cudaSuccess) {                                                       \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)

int main(int argc, char** argv) {
    const long long n = argc > 1 ? std::atoll(argv[1]) : 1000003;
    std::vector<float> a(n), b(n), out(n);
    for (long long i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i % 1000) * 0.5f;
        b[i] = 1.0f - static_cast<float>(i % 7);
    }
    float *da, *db, *dout;
    const size_t bytes = n * sizeof(float);
    CHECK(cudaMalloc(&da, bytes));
    CHECK(cudaMalloc(&db, bytes));
    CHECK(cudaMalloc(&dout, bytes));
    CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));

    const int threads = 256;
    const long long blocks = (n + threads - 1) / threads;  // round up: the tail needs a block
    vector_add_kernel1_f32<<<blocks, threads>>>(da, db, dout, n);
    CHECK(cudaGetLastError());       // a bad launch configuration is reported here
    CHECK(cudaDeviceSynchronize());  // a fault inside the kernel is reported here

    CHECK(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost));
    long long wrong = 0;
    for (long long i = 0; i < n; ++i) wrong += out[i] != a[i] + b[i];
    std::printf("vector add of %lld floats: %lld wrong\n", n, wrong);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dout));
    return wrong == 0 ? 0 : 1;
}

// The reference kernel of the CUDA benchmark (cuda_bench.cc): a read-only
// pass over a float buffer at the speed the memory allows, the yardstick
// for the statistics pass (which must read everything once and write next
// to nothing). Implemented in cuda_bench.cu; nvcc compiles it, so no
// Abseil here.
#ifndef TERN_KERNELS_CUDA_BENCH_H_
#define TERN_KERNELS_CUDA_BENCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tern::kernels::cuda {

inline constexpr uint32_t kReadOnlySumThreads = 256;

// partials[b] = the sum of the elements CTA b read, for num_ctas CTAs that
// stride over values[0, n) with float4 loads (values 16-byte aligned, as
// cudaMalloc returns it).
cudaError_t LaunchReadOnlySum(const float* values, uint64_t n, float* partials,
                              uint32_t num_ctas, cudaStream_t stream);

}  // namespace tern::kernels::cuda

#endif  // TERN_KERNELS_CUDA_BENCH_H_

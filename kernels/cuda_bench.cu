// A read-only reduction, the benchmark's yardstick (cuda_bench.h): each
// thread keeps four float4 loads in flight per step, the CTA adds its
// threads' sums in shared memory, and one float per CTA is written.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda_bench.h"

namespace tern::kernels::cuda {
namespace {

__global__ void __launch_bounds__(kReadOnlySumThreads)
    ReadOnlySumKernel(const float* values, uint64_t n, float* partials) {
  __shared__ float warp_sums[kReadOnlySumThreads / 32];
  const float4* vectors = reinterpret_cast<const float4*>(values);
  const uint64_t num_vectors = n / 4;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  float4 acc[4] = {};
  constexpr uint32_t kUnroll = 4;
  for (; i + (kUnroll - 1) * stride < num_vectors; i += kUnroll * stride) {
    float4 v[kUnroll];
#pragma unroll
    for (uint32_t k = 0; k < kUnroll; ++k)
      v[k] = __ldg(vectors + i + k * stride);
#pragma unroll
    for (uint32_t k = 0; k < kUnroll; ++k) {
      acc[k].x += v[k].x;
      acc[k].y += v[k].y;
      acc[k].z += v[k].z;
      acc[k].w += v[k].w;
    }
  }
  for (; i < num_vectors; i += stride) {
    const float4 v = __ldg(vectors + i);
    acc[0].x += v.x;
    acc[0].y += v.y;
    acc[0].z += v.z;
    acc[0].w += v.w;
  }
  float sum = 0.0f;
#pragma unroll
  for (uint32_t k = 0; k < kUnroll; ++k) {
    sum += acc[k].x + acc[k].y + acc[k].z + acc[k].w;
  }
  // The n % 4 tail, by the first threads of CTA 0.
  if (blockIdx.x == 0 && threadIdx.x < n % 4) {
    sum += values[num_vectors * 4 + threadIdx.x];
  }
  for (uint32_t delta = 16; delta > 0; delta /= 2) {
    sum += __shfl_down_sync(0xFFFFFFFFu, sum, delta);
  }
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (uint32_t w = 0; w < kReadOnlySumThreads / 32; ++w) {
      total += warp_sums[w];
    }
    partials[blockIdx.x] = total;
  }
}

}  // namespace

cudaError_t LaunchReadOnlySum(const float* values, uint64_t n, float* partials,
                              uint32_t num_ctas, cudaStream_t stream) {
  if (num_ctas == 0) return cudaSuccess;
  ReadOnlySumKernel<<<num_ctas, kReadOnlySumThreads, 0, stream>>>(values, n,
                                                                  partials);
  return cudaGetLastError();
}

}  // namespace tern::kernels::cuda

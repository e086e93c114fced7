// The host entry points of the 1-bit CUDA kernels (onebit_gpu.cu): plain
// functions that enqueue one kernel on a stream and return the launch's
// cudaError_t. No Abseil here (nvcc compiles the .cu file outside Bazel's
// toolchain); onebit_cuda.h builds the tables, owns the memory and turns
// errors into absl::Status.
//
// An encode is five launches over all chunks of a flat buffer at once:
//   1. GroupMax over elements: finiteness, and the largest magnitude of
//      every exactly-summed group;
//   2. SampleMax over draws: the largest magnitude of every sampled group;
//   3. GroupSums over elements: the sign bits, and the fixed-point sums of
//      the exactly-summed groups (onebit_math.h);
//   4. SampleSums over draws: the sums of the sampled groups;
//   5. Means: two floats per group.
// With error feedback every pass reads values[i] + residual[i] (the
// compensated gradient, one float addition as on the CPU), and a sixth
// launch writes the next residual aside.
//
// Element CTAs: chunk c owns [first_cta[c], first_cta[c + 1]), each CTA
// kOneBitElementsPerCta elements of it; draw CTAs likewise
// kOneBitDrawsPerCta draws of the chunk's numbering (GroupMeans in
// onebit.h). Preconditions (the wrapper checks them): every range lies
// inside its buffer, group sums are zero before pass 1, the error word is
// all ones.
#ifndef TERN_KERNELS_ONEBIT_CUDA_LAUNCH_H_
#define TERN_KERNELS_ONEBIT_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/onebit_tile_cuda.h"

namespace tern::kernels::cuda {

// first_bad: one word, all ones before; the lowest flat index of a
// non-finite compensated value is atomicMin'ed into it.
cudaError_t LaunchOneBitGroupMax(const OneBitInputs& in, OneBitGrid grid,
                                 OneBitGroupSums* groups,
                                 unsigned long long* first_bad,
                                 cudaStream_t stream);
cudaError_t LaunchOneBitSampleMax(const OneBitInputs& in, OneBitGrid grid,
                                  OneBitGroupSums* groups, cudaStream_t stream);
cudaError_t LaunchOneBitGroupSums(const OneBitInputs& in, OneBitGrid grid,
                                  OneBitGroupSums* groups, uint8_t* packed,
                                  cudaStream_t stream);
cudaError_t LaunchOneBitSampleSums(const OneBitInputs& in, OneBitGrid grid,
                                   OneBitGroupSums* groups,
                                   cudaStream_t stream);
// means[2g], means[2g + 1] of every group g < num_groups of every chunk.
cudaError_t LaunchOneBitMeans(const OneBitInputs& in, uint64_t num_groups,
                              const OneBitGroupSums* groups, float* means,
                              cudaStream_t stream);
// next_residual[i] = compensated[i] - decoded[i] over the element grid;
// the lowest flat index whose result is not finite goes to first_bad.
cudaError_t LaunchOneBitResidual(const OneBitInputs& in, OneBitGrid grid,
                                 const float* means, float* next_residual,
                                 unsigned long long* first_bad,
                                 cudaStream_t stream);

}  // namespace tern::kernels::cuda

#endif  // TERN_KERNELS_ONEBIT_CUDA_LAUNCH_H_

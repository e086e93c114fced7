// The chunk tables of the 1-bit CUDA encoder (onebit_cuda.h), built and
// checked on the host. Plain C++, so that the tests of the tables and the
// host emulation of the kernels (onebit_tile_test.cc) run in every build.
#ifndef TERN_KERNELS_ONEBIT_CUDA_PLAN_H_
#define TERN_KERNELS_ONEBIT_CUDA_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/onebit_tile_cuda.h"
#include "kernels/payload.h"

namespace tern::kernels {

// values[offset, offset + count) encoded in groups of
// OneBitGroupSize(count, group_size) (group_size is
// EncodeContext::group_size), drawing with RandomStream::chunk = key.
struct CudaOneBitChunk {
  uint32_t key = 0;
  uint64_t offset = 0;
  uint64_t count = 0;
  uint64_t group_size = 0;
};

// The kernels' tables for a chunk list: built and checked on the host,
// exposed so that tests can check the validation without a GPU.
struct OneBitCudaPlan {
  std::vector<cuda::OneBitChunk> chunks;
  std::vector<uint32_t> element_first_cta;
  uint32_t element_ctas = 0;
  std::vector<uint32_t> draw_first_cta;
  uint32_t draw_ctas = 0;
  uint64_t num_groups = 0;
  uint64_t packed_bytes = 0;
};

// INVALID_ARGUMENT naming the entry when a chunk lies outside
// [0, num_values), is longer than kMaxOneBitElements, or its groups do not
// fit the uint32 header; with `disjoint` (error feedback writes the
// residual of every chunk) also when two chunks overlap.
absl::StatusOr<OneBitCudaPlan> PlanOneBitCuda(
    absl::Span<const CudaOneBitChunk> chunks, uint64_t num_values,
    uint32_t sample_size, bool disjoint);

// The payloads of a plan's chunks from the kernels' outputs: `packed`
// (plan.packed_bytes of sign bits) and `means` (2 * plan.num_groups), as
// OneBitCodec::Encode lays them out.
std::vector<Payload> OneBitPayloads(const OneBitCudaPlan& plan,
                                    absl::Span<const uint8_t> packed,
                                    absl::Span<const float> means);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_ONEBIT_CUDA_PLAN_H_

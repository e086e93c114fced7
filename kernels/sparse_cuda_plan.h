// Host-side planning for the sparse CUDA kernels (sparse_cuda.h): the chunk
// table the sampling kernel walks, checked against its buffer before
// anything runs. Plain C++ (no CUDA), so its test runs in every build.
#ifndef TERN_KERNELS_SPARSE_CUDA_PLAN_H_
#define TERN_KERNELS_SPARSE_CUDA_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/sparse_select_math.h"

namespace tern::kernels {

// A chunk of a flat device buffer: values[offset, offset + count).
struct CudaSparseChunk {
  uint64_t offset = 0;
  uint64_t count = 0;
};

// The chunks as one concatenation of `total` values: the nonempty ones in
// table order (empty chunks hold no value a draw could hit).
struct SampleTable {
  std::vector<sparse::SampleChunk> chunks;
  uint64_t total = 0;
};

// INVALID_ARGUMENT naming the entry when a chunk does not lie inside a
// buffer of num_values floats, when the counts add up past 2^64 - 1, or
// when more than 2^32 - 1 chunks are nonempty. Chunks may overlap (they
// are only read).
absl::StatusOr<SampleTable> PlanSampleTable(
    absl::Span<const CudaSparseChunk> chunks, uint64_t num_values);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_SPARSE_CUDA_PLAN_H_

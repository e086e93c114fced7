#include "kernels/sparse_cuda_plan.h"

#include <limits>

#include "absl/strings/str_format.h"

namespace tern::kernels {

absl::StatusOr<SampleTable> PlanSampleTable(
    absl::Span<const CudaSparseChunk> chunks, uint64_t num_values) {
  SampleTable table;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CudaSparseChunk& chunk = chunks[i];
    // [offset, offset + count) inside [0, num_values), without overflow.
    if (chunk.count > num_values || chunk.offset > num_values - chunk.count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk table entry %d: values [%d, %d + %d) is outside the buffer "
          "of %d",
          i, chunk.offset, chunk.offset, chunk.count, num_values));
    }
    if (chunk.count == 0) continue;
    if (chunk.count > std::numeric_limits<uint64_t>::max() - table.total) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk table entry %d: the chunks hold more than 2^64 - 1 values",
          i));
    }
    if (table.chunks.size() == std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk table entry %d: more than 2^32 - 1 nonempty chunks", i));
    }
    table.chunks.push_back(sparse::SampleChunk{table.total, chunk.offset});
    table.total += chunk.count;
  }
  return table;
}

}  // namespace tern::kernels

#include "worker/local_scalers.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tern::worker {

absl::StatusOr<std::vector<float>> LocalScalers(
    uint64_t step, absl::Span<const Chunk> chunks,
    absl::Span<const float> gradients, absl::Span<const std::string> names,
    float clip, const std::vector<kernels::ChunkStats>* device_stats) {
  uint32_t keys = 0;  // the largest key + 1: `chunks` may be a shard's
  for (const Chunk& chunk : chunks) keys = std::max(keys, chunk.key + 1);
  std::vector<float> scalers(keys, 0.0f);
  for (const Chunk& chunk : chunks) {
    if (chunk.num_elements == 0) continue;
    const kernels::ChunkStats stats =
        device_stats != nullptr ? (*device_stats)[chunk.key]
                                : kernels::ComputeStats(gradients.subspan(
                                      chunk.flat_offset, chunk.num_elements));
    // ComputeStats leaves NaN and Inf out of the moments and counts them.
    if (stats.nonfinite > 0 || !std::isfinite(stats.stddev()) ||
        !std::isfinite(stats.max_abs)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "step ", step, ": the gradient of tensor '", names[chunk.tensor],
          "' (chunk ", chunk.key, ") has ", stats.nonfinite,
          " non-finite value(s); stopping instead of pushing them (lower "
          "--lr, or check the data)"));
    }
    scalers[chunk.key] = kernels::LocalScaler(stats, clip);
  }
  return scalers;
}

}  // namespace tern::worker

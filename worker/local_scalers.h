// Each chunk's statistics and local scaler s_ik = min(c * sigma, max|g|)
// (DESIGN section 3, step 2), with the NaN policy (section 7): a worker
// never pushes NaN or Inf; it stops with an error naming the step and the
// tensor, and the shards' barriers then time out for the other workers.
#ifndef TERN_WORKER_LOCAL_SCALERS_H_
#define TERN_WORKER_LOCAL_SCALERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/partitioner.h"
#include "kernels/terngrad.h"

namespace tern::worker {

// The local scaler of every chunk of `chunks` (by key, up to the largest
// key of `chunks`; 0 for an empty chunk and for keys not in `chunks`), from the
// chunk's part of `gradients` (the flat buffer) or, with `device_stats` (one
// per chunk, from the GPU), from those statistics without reading `gradients`.
// `names` are the tensors' names, for the error. FAILED_PRECONDITION on a
// non-finite gradient.
absl::StatusOr<std::vector<float>> LocalScalers(
    uint64_t step, absl::Span<const Chunk> chunks,
    absl::Span<const float> gradients, absl::Span<const std::string> names,
    float clip, const std::vector<kernels::ChunkStats>* device_stats = nullptr);

}  // namespace tern::worker

#endif  // TERN_WORKER_LOCAL_SCALERS_H_

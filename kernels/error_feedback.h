// Error feedback (Seide et al. 2014; Strom 2015; Aji & Heafield 2017): a
// worker adds to each gradient chunk what its previous encodes of that chunk
// dropped, encodes the sum, and keeps as the new residual what the payload
// does not carry. Nothing is lost over steps: the sum of the decoded pushes
// plus the final residual equals the sum of the gradients.
//
// The wrapper owns the codec it decorates and one residual per chunk key.
// Its state is part of a worker's checkpoint (SaveState / RestoreState).
// Not thread-safe across calls for the same chunk; calls for different
// chunks may run concurrently once every chunk has been Register()ed.
#ifndef TERN_KERNELS_ERROR_FEEDBACK_H_
#define TERN_KERNELS_ERROR_FEEDBACK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/codec.h"
#include "kernels/payload.h"

namespace tern::kernels {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(std::unique_ptr<Codec> inner);

  const Codec& codec() const { return *inner_; }

  // Creates the (zero) residual of a chunk. INVALID_ARGUMENT if the key is
  // registered already with another size.
  absl::Status Register(uint32_t chunk_key, uint64_t num_elements);

  // values += residual, in place: the compensated gradient. Separate from
  // Encode so that a caller can look at every compensated chunk first (the
  // dropping codec's global threshold is selected over all of them).
  absl::Status Compensate(uint32_t chunk_key, absl::Span<float> values);

  // Encodes compensated values and sets residual = values - Decode(payload).
  absl::StatusOr<Payload> EncodeCompensated(uint32_t chunk_key,
                                            absl::Span<const float> values,
                                            const EncodeContext& context);

  // The residual of a chunk (for tests, metrics and the GPU twin).
  absl::StatusOr<absl::Span<const float>> Residual(uint32_t chunk_key) const;

  // Every residual, as bytes: a versioned little-endian record of
  // (codec id, chunk count, per chunk: key, length, floats). RestoreState
  // accepts only what SaveState of the same codec wrote for the same
  // registered chunks, and changes nothing on error.
  std::string SaveState() const;
  absl::Status RestoreState(absl::string_view state);

 private:
  std::unique_ptr<Codec> inner_;
  absl::flat_hash_map<uint32_t, std::vector<float>> residuals_;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_ERROR_FEEDBACK_H_

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
  // `inner` must not be null.
  explicit ErrorFeedback(std::unique_ptr<Codec> inner);

  const Codec& codec() const { return *inner_; }

  // Creates the (zero) residual of a chunk. INVALID_ARGUMENT if the key is
  // registered already with another size; registering it again with the
  // same size is a no-op. Not concurrent with any other call.
  absl::Status Register(uint32_t chunk_key, uint64_t num_elements);

  // values += residual, in place: the compensated gradient. Separate from
  // Encode so that a caller can look at every compensated chunk first (the
  // dropping codec's global threshold is selected over all of them).
  // NOT_FOUND for a chunk never registered, INVALID_ARGUMENT for a length
  // other than the registered one. The residual itself is not changed:
  // compensating twice before one EncodeCompensated counts it twice.
  absl::Status Compensate(uint32_t chunk_key, absl::Span<float> values);

  // Encodes compensated values and sets residual = values - Decode(payload).
  // Errors as Compensate's, plus INVALID_ARGUMENT for a non-finite value or
  // a residual that would overflow, and the inner codec's own errors; on
  // any error the residual is left as it was.
  absl::StatusOr<Payload> EncodeCompensated(uint32_t chunk_key,
                                            absl::Span<const float> values,
                                            const EncodeContext& context);

  // The residual of a chunk (for tests, metrics and the GPU twin), valid
  // until the next EncodeCompensated or RestoreState. NOT_FOUND for a chunk
  // never registered.
  absl::StatusOr<absl::Span<const float>> Residual(uint32_t chunk_key) const;

  // Every residual, as bytes: a versioned little-endian record of
  // (codec id, chunk count, per chunk: key, length, floats), chunks by
  // increasing key so that equal residuals give equal bytes. RestoreState
  // accepts only what SaveState of the same codec wrote for the same
  // registered chunks (INVALID_ARGUMENT naming the first problem: size,
  // magic, version, codec, chunk count, unknown or repeated key, length,
  // truncation, trailing bytes, a non-finite value) and changes nothing on
  // error. Neither is concurrent with the per-chunk calls.
  std::string SaveState() const;
  absl::Status RestoreState(absl::string_view state);

 private:
  std::unique_ptr<Codec> inner_;
  absl::flat_hash_map<uint32_t, std::vector<float>> residuals_;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_ERROR_FEEDBACK_H_

// Internal to kernels/: the checks every decoder makes on a payload's
// header before it looks at the bytes, with messages that name the field.
#ifndef TERN_KERNELS_PAYLOAD_CHECKS_H_
#define TERN_KERNELS_PAYLOAD_CHECKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/payload.h"

namespace tern::kernels {

// Codec, format version and element count.
absl::Status CheckPayloadHeader(const Payload& payload, CodecId codec,
                                uint64_t num_elements);

// Exactly `count` scalers, all finite and >= 0 (a scaler is a magnitude).
absl::Status CheckScalers(const Payload& payload, size_t count);

// A push is one worker's values: num_summands == 1.
absl::Status CheckIsPush(const Payload& payload);

// The payload's data as bytes, valid until the payload changes.
inline absl::Span<const uint8_t> DataBytes(const Payload& payload) {
  return absl::Span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(payload.data.data()),
      payload.data.size());
}

// Resizes the payload's data to `size` bytes and returns them.
inline absl::Span<uint8_t> ResizeData(Payload* payload, size_t size) {
  payload->data.resize(size);
  return absl::Span<uint8_t>(reinterpret_cast<uint8_t*>(&payload->data[0]),
                             size);
}

}  // namespace tern::kernels

#endif  // TERN_KERNELS_PAYLOAD_CHECKS_H_

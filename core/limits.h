// Size limits every server applies to what peers send: element counts and
// the message-size bound.
//
// kMaxTensorElements = 2^40 for every server (the shard used 2^62, the LPS
// and the GS 2^40). 2^40 fp32 values are 4 TiB, far beyond any gRPC
// message (at most 2 GiB), so no trainable tensor that could ever travel is
// refused; and with counts below 2^40 the byte arithmetic that follows
// (4 bytes per element, framing per chunk) cannot overflow 64 bits, which
// it could at 2^62 (2^62 * 4 wraps to 0 and would pass the size check).
#ifndef TERN_CORE_LIMITS_H_
#define TERN_CORE_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tern::core {

inline constexpr uint64_t kMaxTensorElements = uint64_t{1} << 40;

// Framing of one chunk in a message at most (key, codec, layout, version,
// counts, scalers, length prefixes), and the slack for everything else.
inline constexpr uint64_t kChunkFramingBytes = 128;
inline constexpr uint64_t kMessageSlackBytes = uint64_t{1} << 20;

// "[3, 4]".
std::string ShapeString(absl::Span<const int64_t> shape);

// The elements of tensor `name` of `shape`: INVALID_ARGUMENT "tensor 'w'
// has a negative dimension [2, -1]" or "tensor 'w' of shape [...] is too
// large (more than 2^40 elements)".
absl::StatusOr<uint64_t> TensorElements(absl::string_view name,
                                        absl::Span<const int64_t> shape);

// Bytes a message of `num_chunks` chunks of `num_elements` elements in all
// needs at most in fp32 (the widest encoding): 4 bytes per element,
// kChunkFramingBytes per chunk and kMessageSlackBytes. The bound the
// servers check their models against and the workers size their channels
// with (worker/ps_client.h, MessageBytesBound). Saturates at UINT64_MAX
// instead of wrapping.
uint64_t Fp32MessageBytes(uint64_t num_elements, uint64_t num_chunks);

}  // namespace tern::core

#endif  // TERN_CORE_LIMITS_H_

// Size limits every server applies to what peers send: element counts,
// the message-size bound, and the model bound a join is checked against
// before anything is allocated for the model.
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

// A model as common/partitioner.h would cut it, counted without cutting it:
// a join's tensors may declare billions of chunks in a few bytes, and a
// server sizes nothing from them before CheckModelFits has passed. (Once
// it has, the partition holds at most num_shards * max_message_bytes / 128
// chunks: the limits the server was started with bound its memory.)
struct ModelSize {
  uint64_t elements = 0;  // all tensors' elements
  uint64_t chunks = 0;    // Partition::ChunkCount of each tensor, summed
};

// The size of tensors of `tensor_elements` elements (each at most
// kMaxTensorElements: TensorElements) cut at `partition_bytes`. Sums
// saturate at UINT64_MAX, so any number of tensors counts safely.
// INVALID_ARGUMENT if partition_bytes < 4 and there is a tensor (the
// partitioner's message; Partition::Create refuses it for any model).
absl::StatusOr<ModelSize> SizeModel(absl::Span<const uint64_t> tensor_elements,
                                    uint64_t partition_bytes);

// The model bound: can `num_shards` servers whose messages carry at most
// `max_message_bytes` each carry `model`? Each shard's push and pull of its
// share must fit one message in fp32 (Fp32MessageBytes), so the shares
// together must fit all of them:
//   4 * elements + kChunkFramingBytes * chunks
//       <= num_shards * (max_message_bytes - kMessageSlackBytes).
// FAILED_PRECONDITION otherwise, naming the model's counts, the bytes, the
// shards and the limit, ending with `remedy` (the flag to change).
// INVALID_ARGUMENT for more chunks than a uint32 key can number. Necessary,
// not sufficient: a shard checks its own share once the model is cut.
absl::Status CheckModelFits(const ModelSize& model, uint32_t num_shards,
                            uint64_t max_message_bytes,
                            absl::string_view remedy);

}  // namespace tern::core

#endif  // TERN_CORE_LIMITS_H_

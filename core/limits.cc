#include "core/limits.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/partitioner.h"

namespace tern::core {
namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > kMaxU64 - b ? kMaxU64 : a + b;
}

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  return b != 0 && a > kMaxU64 / b ? kMaxU64 : a * b;
}

}  // namespace

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<uint64_t> TensorElements(absl::string_view name,
                                        absl::Span<const int64_t> shape) {
  uint64_t elements = 1;
  for (const int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' has a negative dimension ",
                       ShapeString(shape)));
    }
    if (dim != 0 &&
        elements > kMaxTensorElements / static_cast<uint64_t>(dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' of shape ", ShapeString(shape),
                       " is too large (more than 2^40 elements)"));
    }
    elements *= static_cast<uint64_t>(dim);
  }
  return elements;
}

uint64_t Fp32MessageBytes(uint64_t num_elements, uint64_t num_chunks) {
  const uint64_t data = SaturatingMul(num_elements, sizeof(float));
  const uint64_t framing = SaturatingMul(num_chunks, kChunkFramingBytes);
  return SaturatingAdd(SaturatingAdd(data, framing), kMessageSlackBytes);
}

absl::StatusOr<ModelSize> SizeModel(absl::Span<const uint64_t> tensor_elements,
                                    uint64_t partition_bytes) {
  ModelSize model;
  for (const uint64_t elements : tensor_elements) {
    absl::StatusOr<uint64_t> chunks =
        Partition::ChunkCount(elements, partition_bytes);
    if (!chunks.ok()) return chunks.status();
    model.elements = SaturatingAdd(model.elements, elements);
    model.chunks = SaturatingAdd(model.chunks, *chunks);
  }
  return model;
}

absl::Status CheckModelFits(const ModelSize& model, uint32_t num_shards,
                            uint64_t max_message_bytes,
                            absl::string_view remedy) {
  if (model.chunks > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", model.chunks,
                     " chunks, more than 2^32 - 1; raise partition_bytes"));
  }
  // The model's bytes without the slack: Fp32MessageBytes(e, c) - slack.
  const uint64_t bytes =
      Fp32MessageBytes(model.elements, model.chunks) - kMessageSlackBytes;
  const uint64_t room =
      max_message_bytes > kMessageSlackBytes
          ? SaturatingMul(num_shards, max_message_bytes - kMessageSlackBytes)
          : 0;
  if (bytes <= room) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the model's %d elements in %d chunks take %d bytes in fp32, more "
      "than %d %s with a limit of %d MiB (--max_message_mb) can carry; %s",
      model.elements, model.chunks, bytes, num_shards,
      num_shards == 1 ? "shard" : "shards", max_message_bytes >> 20, remedy));
}

}  // namespace tern::core

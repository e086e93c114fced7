#include "core/limits.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tern::core {

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
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  constexpr uint64_t kFloat = sizeof(float);
  if (num_elements > (kMax - kMessageSlackBytes) / kFloat) return kMax;
  const uint64_t data = num_elements * kFloat + kMessageSlackBytes;
  if (num_chunks > (kMax - data) / kChunkFramingBytes) return kMax;
  return data + num_chunks * kChunkFramingBytes;
}

}  // namespace tern::core

// float32 values as the little-endian bytes the state files store them in
// (a shard's residuals, the global server's sums), and back.
#ifndef TERN_COMMON_FLOAT_BYTES_H_
#define TERN_COMMON_FLOAT_BYTES_H_

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tern {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the state files hold little-endian floats; this copy assumes "
              "the host is");

inline std::string FloatBytes(absl::Span<const float> values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(float));
}

// nullopt when `bytes` is not a whole number of floats.
inline std::optional<std::vector<float>> FloatsFromBytes(
    absl::string_view bytes) {
  if (bytes.size() % sizeof(float) != 0) return std::nullopt;
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!bytes.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

}  // namespace tern

#endif  // TERN_COMMON_FLOAT_BYTES_H_

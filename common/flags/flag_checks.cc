#include "common/flags/flag_checks.h"

#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace tern::flags {

bool IsHostPort(absl::string_view text) {
  const size_t colon = text.rfind(':');
  return colon != absl::string_view::npos && colon > 0 &&
         colon + 1 < text.size();
}

bool IsFinitePositive(double value) {
  return std::isfinite(value) && value > 0;
}

absl::Status CheckMessageAndLogFlags(uint32_t max_message_mb,
                                     const std::string& log_level) {
  if (max_message_mb == 0 || max_message_mb > kMaxMessageMb) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_mb=", max_message_mb, " is not in [1, ",
                     kMaxMessageMb, "]"));
  }
  if (absl::StatusOr<spdlog::level::level_enum> level =
          ParseLogLevel(log_level);
      !level.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level: ", level.status().message()));
  }
  return absl::OkStatus();
}

namespace {

absl::Status NotAFiniteNumber(absl::string_view flag, double value,
                              absl::string_view bound) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " is not a finite number ", bound));
}

}  // namespace

absl::Status CheckFinitePositive(absl::string_view flag, double value) {
  if (IsFinitePositive(value)) return absl::OkStatus();
  return NotAFiniteNumber(flag, value, "> 0");
}

absl::Status CheckFiniteNonNegative(absl::string_view flag, double value) {
  if (std::isfinite(value) && value >= 0) return absl::OkStatus();
  return NotAFiniteNumber(flag, value, ">= 0");
}

}  // namespace tern::flags

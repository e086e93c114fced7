// The checks of flag values that need no command-line parser: for options
// that a program builds in code instead of parsing (every role's
// Validate(options)) and for the parser's own checks (flags.h). Apart from
// flags.h so that files which only check or convert a value (a server's
// message limit) do not compile CLI11, which costs about 6 s per file.
#ifndef TERN_COMMON_FLAGS_FLAG_CHECKS_H_
#define TERN_COMMON_FLAGS_FLAG_CHECKS_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tern::flags {

// gRPC's message sizes are ints: --max_message_mb is at most 2 GiB - 1.
inline constexpr uint32_t kMaxMessageMb = 2047;

// --max_message_mb in bytes, as gRPC's int limits take it. Clamped to
// kMaxMessageMb, so that an unchecked value cannot overflow the int.
inline constexpr int MessageBytes(uint32_t max_message_mb) {
  return static_cast<int>(std::min(max_message_mb, kMaxMessageMb)) << 20;
}

// "host:port": a non-empty host before the last colon and a port after it.
bool IsHostPort(absl::string_view text);
// A finite number > 0.
bool IsFinitePositive(double value);

// What a role's Validate(options) checks of the two flags every server
// has, for options built in code rather than parsed: --max_message_mb in
// [1, kMaxMessageMb] and --log_level a level ParseLogLevel accepts. The
// error names the flag.
absl::Status CheckMessageAndLogFlags(uint32_t max_message_mb,
                                     const std::string& log_level);

// The same for a number flag (seconds, a rate) built in code: OK when
// `value` is finite and > 0 (CheckFinitePositive) or >= 0
// (CheckFiniteNonNegative); else INVALID_ARGUMENT naming --`flag` and the
// value, e.g. "--join_timeout_s=nan is not a finite number > 0".
absl::Status CheckFinitePositive(absl::string_view flag, double value);
absl::Status CheckFiniteNonNegative(absl::string_view flag, double value);

}  // namespace tern::flags

#endif  // TERN_COMMON_FLAGS_FLAG_CHECKS_H_

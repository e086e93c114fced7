// The flag helpers every role's flags use (server/ps_flags.cc,
// global/gs_flags.cc, worker/worker_flags.cc): how a flag is registered
// (--name, TERN_<NAME>, its default shown in --help) and the checks that
// CLI11 lacks or gets wrong (CLI::PositiveNumber and CLI::Range let inf or
// NaN through). A check's message names the bad value; CLI11 adds the flag.
#ifndef TERN_COMMON_FLAGS_FLAGS_H_
#define TERN_COMMON_FLAGS_FLAGS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tern::flags {

// gRPC's message sizes are ints: --max_message_mb is at most 2 GiB - 1.
inline constexpr uint32_t kMaxMessageMb = 2047;

// --max_message_mb in bytes, as gRPC's int limits take it. Clamped to
// kMaxMessageMb, so that an unchecked value cannot overflow the int.
inline constexpr int MessageBytes(uint32_t max_message_mb) {
  return static_cast<int>(std::min(max_message_mb, kMaxMessageMb)) << 20;
}

// Registers --name on `app`, writing into `*value` (which must outlive the
// parse), with `help`, its default shown and the environment variable
// TERN_<NAME> (the command line wins over the environment, which wins over
// the default).
template <typename T>
CLI::Option* Flag(CLI::App* app, const std::string& name, T* value,
                  const std::string& help) {
  return app->add_option("--" + name, *value, help)
      ->envname("TERN_" + absl::AsciiStrToUpper(name))
      ->capture_default_str();
}

// The switch --name (also --name=true|false) with `help` and TERN_<NAME>
// (true/false/1/0).
CLI::Option* Switch(CLI::App* app, const std::string& name, bool* value,
                    const std::string& help);

// "host:port": a non-empty host before the last colon and a port after it.
bool IsHostPort(absl::string_view text);
// A finite number > 0.
bool IsFinitePositive(double value);

// Checks for ->check(...).
CLI::Validator HostPort();
CLI::Validator FinitePositive();
// A finite number in [low, high]; high may be +inf ("finite number >= low").
CLI::Validator FiniteIn(double low, double high);
// A finite number strictly between low and high.
CLI::Validator FiniteBetween(double low, double high);
// A name ParseLogLevel (common/logging.h) accepts.
CLI::Validator LogLevel();
CLI::Validator NonEmpty();

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

// Reads a name into an enum flag once, at parse time: `parse` turns the
// name into the enum and the transform hands CLI11 its number, which CLI11
// stores into the enum field (register it with ->transform(...)). A name
// `parse` refuses fails the parse with "'<name>' is not one of <names()>";
// `label` is what --help shows for the value.
template <typename Enum, typename Parse>
CLI::Validator EnumName(Parse parse, std::string (*names)(),
                        const std::string& label) {
  return CLI::Validator(
      [parse, names](std::string& input) -> std::string {
        const absl::StatusOr<Enum> value = parse(input);
        if (!value.ok()) {
          return absl::StrCat("'", input, "' is not one of ", names());
        }
        input =
            std::to_string(static_cast<std::underlying_type_t<Enum>>(*value));
        return std::string();
      },
      label);
}

}  // namespace tern::flags

#endif  // TERN_COMMON_FLAGS_FLAGS_H_

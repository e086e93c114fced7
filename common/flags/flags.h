// The flag helpers every role's flags use (server/ps_flags.cc,
// global/gs_flags.cc, worker/worker_flags.cc): how a flag is registered
// (--name, TERN_<NAME>, its default shown in --help) and the checks that
// CLI11 lacks or gets wrong (CLI::PositiveNumber and CLI::Range let inf or
// NaN through). A check's message names the bad value; CLI11 adds the flag.
// The checks that need no parser are in flag_checks.h, which this includes.
#ifndef TERN_COMMON_FLAGS_FLAGS_H_
#define TERN_COMMON_FLAGS_FLAGS_H_

#include <string>
#include <type_traits>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/flags/flag_checks.h"

namespace tern::flags {

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

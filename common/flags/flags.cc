#include "common/flags/flags.h"

#include <cmath>
#include <limits>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace tern::flags {

CLI::Option* Switch(CLI::App* app, const std::string& name, bool* value,
                    const std::string& help) {
  return app->add_flag("--" + name, *value, help)
      ->envname("TERN_" + absl::AsciiStrToUpper(name))
      ->capture_default_str();
}

CLI::Validator HostPort() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        return IsHostPort(input)
                   ? std::string()
                   : absl::StrCat("'", input, "' is not of the form host:port");
      },
      "HOST:PORT");
}

CLI::Validator FinitePositive() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value) ||
            !IsFinitePositive(value)) {
          return absl::StrCat("'", input, "' is not a finite number > 0");
        }
        return std::string();
      },
      "NUMBER > 0");
}

CLI::Validator FiniteIn(double low, double high) {
  const std::string description =
      high == std::numeric_limits<double>::infinity()
          ? absl::StrCat("finite number >= ", low)
          : absl::StrCat("number in [", low, ", ", high, "]");
  return CLI::Validator(
      [low, high, description](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value) || !std::isfinite(value) ||
            value < low || value > high) {
          return absl::StrCat("'", input, "' is not a ", description);
        }
        return std::string();
      },
      description);
}

CLI::Validator FiniteBetween(double low, double high) {
  const std::string description =
      absl::StrCat("number in (", low, ", ", high, ")");
  return CLI::Validator(
      [low, high, description](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value) || !std::isfinite(value) ||
            !(value > low && value < high)) {
          return absl::StrCat("'", input, "' is not a ", description);
        }
        return std::string();
      },
      description);
}

CLI::Validator LogLevel() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        const absl::StatusOr<spdlog::level::level_enum> level =
            ParseLogLevel(input);
        return level.ok() ? std::string()
                          : std::string(level.status().message());
      },
      "LEVEL");
}

CLI::Validator NonEmpty() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        return input.empty() ? "must not be empty" : std::string();
      },
      "");
}

}  // namespace tern::flags

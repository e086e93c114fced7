#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/null_sink.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace tern {

Logger MakeLogger(absl::string_view role, absl::string_view id) {
  const std::string name = id.empty() ? std::string(role) : absl::StrCat(role, "/", id);
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(name, std::move(sink));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  logger->flush_on(spdlog::level::warn);
  return logger;
}

Logger MakeNullLogger() {
  return std::make_shared<spdlog::logger>(
      "null", std::make_shared<spdlog::sinks::null_sink_mt>());
}

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name) {
  const auto level = spdlog::level::from_str(std::string(name));
  // from_str answers "off" for anything it does not know.
  if (level == spdlog::level::off && name != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown log level '", name,
        "' (expected trace, debug, info, warn, error, critical or off)"));
  }
  return level;
}

}  // namespace tern

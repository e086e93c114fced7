// Loggers for tern's processes: one line per event, prefixed with the role
// and id (DESIGN section 8), e.g. "[ps/1]". No global registry: main()
// makes the logger and hands it down, so a test can hold several roles.
#ifndef TERN_COMMON_LOGGING_H_
#define TERN_COMMON_LOGGING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

namespace tern {

using Logger = std::shared_ptr<spdlog::logger>;

// A logger writing to stderr as "[time] [role/id] [level] message".
Logger MakeLogger(absl::string_view role, absl::string_view id);

// A logger that drops everything (for tests and benchmarks).
Logger MakeNullLogger();

// "debug", "info", "warn", "error" (and spdlog's other names).
absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name);

}  // namespace tern

#endif  // TERN_COMMON_LOGGING_H_

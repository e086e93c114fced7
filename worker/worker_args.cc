// ParseWorkerArgs (worker/worker_flags.h): the flags of `tern worker` for a
// worker that has no command line of its own.
#include "CLI/CLI.hpp"
#include "common/status_macros.h"
#include "worker/worker_flags.h"

namespace tern::worker {

absl::StatusOr<WorkerOptions> ParseWorkerArgs(
    const std::vector<std::string>& args) {
  WorkerOptions options;
  CLI::App app("tern worker");
  AddWorkerFlags(&app, &options);
  // CLI11 takes a vector of arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  TERN_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  return options;
}

}  // namespace tern::worker

#include "common/process/serve_loop.h"

#include <filesystem>
#include <system_error>

#include "absl/time/clock.h"
#include "common/process/exit_codes.h"
#include "common/process/port_file.h"

namespace tern::process {

int ServeUntilStopped(const StopRequest& stop, const Logger& logger,
                      absl::FunctionRef<absl::Status(absl::Time)> tick,
                      absl::Duration period) {
  while (true) {
    if (stop.WaitFor(period)) {
      logger->info("{}: shutting down", stop.reason());
      return kExitOk;
    }
    if (absl::Status status = tick(absl::Now()); !status.ok()) {
      logger->error("{}; exiting", std::string(status.message()));
      return kExitTransient;
    }
  }
}

bool WritePortFileIfAsked(const std::string& path, int port,
                          const Logger& logger) {
  if (path.empty()) return true;
  const absl::Status status = WritePortFile(path, port);
  if (!status.ok()) logger->error("{}", std::string(status.message()));
  return status.ok();
}

bool MakeStateDirIfAsked(const std::string& dir, const Logger& logger) {
  if (dir.empty()) return true;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    logger->error("--state_dir {}: cannot create it: {}", dir, error.message());
  }
  return !error;
}

}  // namespace tern::process

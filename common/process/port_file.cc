#include "common/process/port_file.h"

#include "absl/strings/str_cat.h"
#include "common/replace_file.h"

namespace tern::process {

absl::Status WritePortFile(const std::string& path, int port) {
  // Several processes may be told the same file: each its own temporary.
  ReplaceFileOptions options;
  options.per_process_temporary = true;
  const absl::Status written =
      ReplaceFile(path, absl::StrCat(port, "\n"), options);
  if (!written.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port_file: ", written.message()));
  }
  return absl::OkStatus();
}

}  // namespace tern::process

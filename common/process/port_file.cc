#include "common/process/port_file.h"

#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace tern::process {

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--port_file: cannot create ", temporary, ": ", strerror(errno)));
  }
  const std::string text = absl::StrCat(port, "\n");
  const bool written =
      std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    return absl::InvalidArgumentError(
        absl::StrCat("--port_file: cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::InvalidArgumentError(
        absl::StrCat("--port_file: cannot rename ", temporary, " to ", path,
                     ": ", strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace tern::process

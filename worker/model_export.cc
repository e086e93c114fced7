#include "worker/model_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace tern::worker {
namespace {

namespace fs = std::filesystem;

std::string TmpPathOf(const std::string& path) {
  return absl::StrCat(path, ".tmp");
}

// The first line of a libtorch error; what() goes on with a backtrace.
std::string FirstLine(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

// Flushes `path`'s bytes to the disk, so that the rename after it cannot
// leave an empty file behind a machine crash.
absl::Status SyncFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return absl::InternalError(
        absl::StrCat("--save_model: cannot sync ", path, ": ", reason));
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelPath(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("--save_model: the path is empty");
  }
  std::error_code ec;
  if (path.back() == '/' || fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--save_model ", path, " is a directory: give a file name, e.g. ",
        (fs::path(path) / "model.pt").string()));
  }
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::create_directories(parent, ec) && ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--save_model ", path, ": cannot make its directory ",
                     parent.string(), ": ", ec.message()));
  }
  // A trial write of the file the model will go to first.
  const std::string tmp = TmpPathOf(path);
  std::ofstream trial(tmp, std::ios::binary | std::ios::trunc);
  if (!trial.is_open()) {
    return absl::InvalidArgumentError(absl::StrCat("--save_model ", path,
                                                   ": cannot write ", tmp, ": ",
                                                   std::strerror(errno)));
  }
  trial.close();
  fs::remove(tmp, ec);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SaveModel(const Model& model,
                                   const std::string& path) {
  const std::string tmp = TmpPathOf(path);
  try {
    model.SaveFile(tmp);
  } catch (const std::exception& e) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return absl::InternalError(absl::StrCat("--save_model: cannot write ",
                                            model.description(), " to ", tmp,
                                            ": ", FirstLine(e)));
  }
  if (absl::Status synced = SyncFile(tmp); !synced.ok()) return synced;
  std::error_code ec;
  const uint64_t bytes = fs::file_size(tmp, ec);
  if (!ec) fs::rename(tmp, path, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("--save_model: cannot move ", tmp,
                                            " to ", path, ": ", ec.message()));
  }
  return bytes;
}

}  // namespace tern::worker

#include "worker/model_export.h"

#include <exception>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/replace_file.h"

namespace tern::worker {
namespace {

namespace fs = std::filesystem;

// The first line of a libtorch error; what() goes on with a backtrace.
std::string FirstLine(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

ReplaceFileOptions Synced() {
  ReplaceFileOptions options;
  options.sync = true;
  return options;
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
  if (absl::Status status = CheckReplaceable(path, Synced()); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--save_model ", path, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SaveModel(const Model& model,
                                   const std::string& path) {
  const auto write = [&model](const std::string& temporary) {
    try {
      model.SaveFile(temporary);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("cannot write ",
                                              model.description(), " to ",
                                              temporary, ": ", FirstLine(e)));
    }
    return absl::OkStatus();
  };
  if (absl::Status status = ReplaceFileBy(path, write, Synced());
      !status.ok()) {
    return absl::InternalError(
        absl::StrCat("--save_model: ", status.message()));
  }
  std::error_code ec;
  const uint64_t bytes = fs::file_size(path, ec);
  return ec ? 0 : bytes;
}

}  // namespace tern::worker

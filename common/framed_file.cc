#include "common/framed_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/replace_file.h"

namespace tern {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kFrameBytes = kMagicBytes + 8 + 8;

void AppendU64(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i) {
    out->push_back(static_cast<char>(value >> (8 * i)));
  }
}

uint64_t ReadU64(absl::string_view bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  }
  return value;
}

absl::Status SystemError(absl::string_view what, absl::string_view action,
                         absl::string_view path) {
  return absl::InternalError(absl::StrCat(what, ": cannot ", action, " '", path,
                                          "': ", std::strerror(errno)));
}

// mkdir -p.
absl::Status MakeDirectories(const std::string& dir, absl::string_view what) {
  for (size_t end = 1; end <= dir.size(); ++end) {
    if (end != dir.size() && dir[end] != '/') continue;
    const std::string prefix = dir.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return SystemError(what, "create directory", prefix);
    }
  }
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

absl::Status WriteFramedFile(const std::string& path, absl::string_view message,
                             const FramedFileOptions& options) {
  const std::string dir = DirectoryOf(path);
  if (absl::Status made = MakeDirectories(dir, options.what); !made.ok()) {
    return made;
  }
  std::string bytes(options.magic);
  bytes.reserve(kFrameBytes + message.size());
  AppendU64(message.size(), &bytes);
  bytes.append(message.data(), message.size());
  AppendU64(ChecksumOf(message), &bytes);
  ReplaceFileOptions replace;
  replace.sync = options.sync;
  const absl::Status replaced = ReplaceFile(path, bytes, replace);
  if (!replaced.ok()) {
    return absl::InternalError(
        absl::StrCat(options.what, ": ", replaced.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFramedFile(const std::string& path,
                                           const FramedFileOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat info;
    if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(options.what, ": no file '", path, "'"));
    }
    return absl::DataLossError(absl::StrCat(options.what, ": cannot open '",
                                            path, "': ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(
        absl::StrCat(options.what, ": cannot read '", path, "'"));
  }
  const std::string bytes = std::move(buffer).str();
  const absl::string_view view(bytes);
  if (bytes.size() < kFrameBytes ||
      view.substr(0, kMagicBytes) != options.magic) {
    return absl::DataLossError(absl::StrCat(options.what, ": '", path,
                                            "' is not a tern ", options.what));
  }
  const uint64_t length = ReadU64(view.substr(kMagicBytes, 8));
  if (length != bytes.size() - kFrameBytes) {
    return absl::DataLossError(absl::StrCat(
        options.what, ": '", path, "' is truncated or has trailing bytes: ",
        bytes.size(), " bytes for a ", length, "-byte ", options.what));
  }
  const absl::string_view message = view.substr(kMagicBytes + 8, length);
  const uint64_t recorded = ReadU64(view.substr(kMagicBytes + 8 + length, 8));
  if (ChecksumOf(message) != recorded) {
    return absl::DataLossError(absl::StrCat(
        options.what, ": '", path, "' is corrupt: its checksum is ",
        FormatChecksum(ChecksumOf(message)), " but it records ",
        FormatChecksum(recorded)));
  }
  return std::string(message);
}

}  // namespace tern

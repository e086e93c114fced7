// Reading gzip-compressed or plain files for the data set loaders.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/datasets_internal.h"

namespace tern::worker::datasets_internal {

absl::StatusOr<GzHandle> OpenForReading(const std::string& path) {
  errno = 0;
  GzHandle file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " not found"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open ", path));
  }
  return file;
}

absl::StatusOr<size_t> ReadBytes(gzFile file, const std::string& path,
                                 size_t size, std::vector<uint8_t>* out) {
  // Grow the buffer as data arrives rather than trusting a header's size:
  // a corrupt header cannot make us allocate gigabytes for a small file.
  constexpr size_t kBlock = size_t{1} << 20;
  size_t done = 0;
  while (done < size) {
    const size_t want = std::min(kBlock, size - done);
    const size_t old_size = out->size();
    out->resize(old_size + want);
    const int got =
        gzread(file, out->data() + old_size, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      out->resize(old_size);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": corrupt data: ", message));
    }
    out->resize(old_size + static_cast<size_t>(got));
    done += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < want) break;
  }
  return done;
}

absl::StatusOr<bool> HasMoreData(gzFile file, const std::string& path) {
  std::vector<uint8_t> probe;
  TERN_ASSIGN_OR_RETURN(const size_t got, ReadBytes(file, path, 1, &probe));
  return got > 0;
}

absl::StatusOr<std::string> FindFile(const std::vector<std::string>& candidates,
                                     absl::string_view hint) {
  for (const std::string& path : candidates) {
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) return path;
  }
  std::string tried;
  if (candidates.size() > 1) {
    tried = absl::StrCat(
        " (nor ", absl::StrJoin(candidates.begin() + 1, candidates.end(), ", "),
        ")");
  }
  return absl::NotFoundError(
      absl::StrCat(candidates.front(), " not found", tried, "; ", hint));
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace tern::worker::datasets_internal

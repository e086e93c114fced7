// Files that must survive a crash at any moment: a worker's checkpoint
// (worker/checkpoint.h) and a shard's state (server/shard_state.h). One
// format and one way to write it, for both:
//
//   magic (8 bytes) | length (u64, little-endian) | message | XXH3-64 of
//   the message (u64, little-endian)
//
// Written to `path`.tmp and renamed over `path` (common/replace_file.h), so
// that `path` holds the old or the new bytes whatever happens; read back with
// every check a file from disk needs (magic, length, checksum).
#ifndef TERN_COMMON_FRAMED_FILE_H_
#define TERN_COMMON_FRAMED_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tern {

struct FramedFileOptions {
  // Eight bytes that say what the file is ("TERNCKP2").
  absl::string_view magic;
  // What the file is, for messages ("checkpoint", "shard state").
  absl::string_view what;
  // fsync the file and its directory: the new bytes survive a machine
  // crash, not only the process's. Costs a disk flush per write.
  bool sync = true;
};

// Writes `message` (serialized bytes) framed to `path`, creating its
// directory if missing. INTERNAL naming the path and the system's reason
// (disk full, permissions).
absl::Status WriteFramedFile(const std::string& path, absl::string_view message,
                             const FramedFileOptions& options);

// The message bytes of `path`. NOT_FOUND when there is no such file;
// DATA_LOSS naming the path when it cannot be read, is not framed with
// options.magic, is truncated or has trailing bytes, or fails its checksum.
absl::StatusOr<std::string> ReadFramedFile(const std::string& path,
                                           const FramedFileOptions& options);

}  // namespace tern

#endif  // TERN_COMMON_FRAMED_FILE_H_

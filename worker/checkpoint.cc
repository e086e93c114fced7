#include "worker/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"

namespace tern::worker {
namespace {

// The frame around the message (proto/tern/v1/checkpoint.proto). The magic
// changed with the checksum (FNV-1a 64 before, XXH3-64 since), so a file of
// the old frame is named as such instead of being reported corrupt.
constexpr absl::string_view kMagic = "TERNCKP2";
constexpr absl::string_view kFnvFrameMagic = "TERNCKPT";
constexpr size_t kFrameBytes = 8 + 8 + 8;

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

absl::Status SystemError(absl::string_view what, absl::string_view path) {
  return absl::InternalError(absl::StrCat("checkpoint: cannot ", what, " '",
                                          path, "': ", std::strerror(errno)));
}

// mkdir -p.
absl::Status MakeDirectories(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  for (size_t end = 1; end <= dir.size(); ++end) {
    if (end != dir.size() && dir[end] != '/') continue;
    const std::string prefix = dir.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return SystemError("create directory", prefix);
    }
  }
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status WriteAll(int fd, const std::string& bytes,
                      const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError("write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointPath(absl::string_view dir, uint32_t worker_id) {
  return absl::StrCat(dir, dir.empty() || dir.back() == '/' ? "" : "/",
                      "worker-", worker_id, ".ckpt");
}

absl::Status WriteCheckpoint(const std::string& path,
                             const tern::v1::WorkerCheckpoint& checkpoint) {
  const std::string dir = DirectoryOf(path);
  if (absl::Status made = MakeDirectories(dir); !made.ok()) return made;
  std::string message;
  if (!checkpoint.SerializeToString(&message)) {
    return absl::InternalError(
        absl::StrCat("checkpoint: cannot serialize the checkpoint for '", path,
                     "' (over 2 GiB?)"));
  }
  std::string bytes(kMagic);
  bytes.reserve(kFrameBytes + message.size());
  AppendU64(message.size(), &bytes);
  bytes += message;
  AppendU64(ChecksumOf(message), &bytes);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return SystemError("create", tmp);
  absl::Status status = WriteAll(fd, bytes, tmp);
  // The data must be on disk before the rename makes it the checkpoint.
  if (status.ok() && ::fsync(fd) != 0) status = SystemError("flush", tmp);
  if (::close(fd) != 0 && status.ok()) status = SystemError("close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = SystemError("rename into place", path);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename itself durable.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

absl::StatusOr<tern::v1::WorkerCheckpoint> ReadCheckpoint(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat info;
    if (::stat(path.c_str(), &info) != 0 && errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint: no file '", path, "'"));
    }
    return absl::DataLossError(absl::StrCat(
        "checkpoint: cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint: cannot read '", path, "'"));
  }
  const std::string bytes = std::move(buffer).str();
  if (absl::string_view(bytes).substr(0, kFnvFrameMagic.size()) ==
      kFnvFrameMagic) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", path,
        "' was written by an older tern (FNV-1a checksums) and cannot be "
        "resumed by this one"));
  }
  if (bytes.size() < kFrameBytes ||
      absl::string_view(bytes).substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", path, "' is not a tern worker checkpoint"));
  }
  const uint64_t length = ReadU64(absl::string_view(bytes).substr(8, 8));
  if (length != bytes.size() - kFrameBytes) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", path, "' is truncated or has trailing bytes: ",
        bytes.size(), " bytes for a ", length, "-byte checkpoint"));
  }
  const absl::string_view message =
      absl::string_view(bytes).substr(16, length);
  const uint64_t recorded =
      ReadU64(absl::string_view(bytes).substr(16 + length, 8));
  if (ChecksumOf(message) != recorded) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", path, "' is corrupt: its checksum is ",
        FormatChecksum(ChecksumOf(message)), " but it records ",
        FormatChecksum(recorded)));
  }
  tern::v1::WorkerCheckpoint checkpoint;
  if (!checkpoint.ParseFromArray(message.data(),
                                 static_cast<int>(message.size()))) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", path, "' does not parse as a worker checkpoint"));
  }
  if (checkpoint.format_version() != kCheckpointFormatVersion) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", path, "' has format version ",
        checkpoint.format_version(), "; this tern reads version ",
        kCheckpointFormatVersion));
  }
  if (checkpoint.params().size() % sizeof(float) != 0) {
    return absl::DataLossError(
        absl::StrCat("checkpoint: '", path, "' holds ",
                     checkpoint.params().size(),
                     " parameter bytes, not a whole number of floats"));
  }
  return checkpoint;
}

absl::Status CheckCheckpointIdentity(
    const tern::v1::WorkerCheckpoint& checkpoint,
    const CheckpointIdentity& expected, absl::string_view path) {
  auto differs = [&](absl::string_view what, const std::string& theirs,
                     const std::string& ours) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", path, "' is of ", what, " ", theirs,
        ", but this worker runs with ", ours,
        ": resume with the flags that wrote it, or give another "
        "--checkpoint_dir"));
  };
  if (checkpoint.run_id() != expected.run_id) {
    return differs("run_id", absl::StrCat("'", checkpoint.run_id(), "'"),
                   absl::StrCat("'", expected.run_id, "'"));
  }
  if (checkpoint.worker_id() != expected.worker_id) {
    return differs("worker_id", absl::StrCat(checkpoint.worker_id()),
                   absl::StrCat(expected.worker_id));
  }
  if (checkpoint.num_workers() != expected.num_workers) {
    return differs("num_workers", absl::StrCat(checkpoint.num_workers()),
                   absl::StrCat(expected.num_workers));
  }
  if (checkpoint.codec() != expected.codec) {
    return differs("codec", checkpoint.codec(), expected.codec);
  }
  if (checkpoint.param_spec_hash() != expected.param_spec_hash) {
    return differs("param spec hash",
                   FormatChecksum(checkpoint.param_spec_hash()),
                   absl::StrCat(FormatChecksum(expected.param_spec_hash),
                                " (another --model)"));
  }
  const uint64_t num_params = checkpoint.params().size() / sizeof(float);
  if (num_params != expected.num_params) {
    return differs("a model with parameter count", absl::StrCat(num_params),
                   absl::StrCat(expected.num_params));
  }
  if (checkpoint.steps() != expected.steps) {
    return differs("steps", absl::StrCat(checkpoint.steps()),
                   absl::StrCat(expected.steps));
  }
  if (checkpoint.next_step() >= checkpoint.steps()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", path, "' is of a finished run (step ",
        checkpoint.next_step(), " of ", checkpoint.steps(),
        "): there is nothing to resume; remove it or give another "
        "--checkpoint_dir"));
  }
  return absl::OkStatus();
}

}  // namespace tern::worker

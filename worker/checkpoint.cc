#include "worker/checkpoint.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/framed_file.h"

namespace tern::worker {
namespace {

// The frame around the message (proto/tern/v1/checkpoint.proto,
// common/framed_file.h). The magic changed with the checksum (FNV-1a 64
// before, XXH3-64 since), so a file of the old frame is named as such
// instead of being reported corrupt.
constexpr FramedFileOptions kFrame{"TERNCKP2", "worker checkpoint",
                                   /*sync=*/true};
constexpr absl::string_view kFnvFrameMagic = "TERNCKPT";

bool OldFrame(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string magic(kFnvFrameMagic.size(), '\0');
  return in.read(magic.data(), magic.size()) && magic == kFnvFrameMagic;
}

}  // namespace

std::string CheckpointPath(absl::string_view dir, uint32_t worker_id) {
  return absl::StrCat(dir, dir.empty() || dir.back() == '/' ? "" : "/",
                      "worker-", worker_id, ".ckpt");
}

absl::Status WriteCheckpoint(const std::string& path,
                             const tern::v1::WorkerCheckpoint& checkpoint) {
  std::string message;
  if (!checkpoint.SerializeToString(&message)) {
    return absl::InternalError(
        absl::StrCat("checkpoint: cannot serialize the checkpoint for '", path,
                     "' (over 2 GiB?)"));
  }
  return WriteFramedFile(path, message, kFrame);
}

absl::StatusOr<tern::v1::WorkerCheckpoint> ReadCheckpoint(
    const std::string& path) {
  absl::StatusOr<std::string> message = ReadFramedFile(path, kFrame);
  if (absl::IsDataLoss(message.status()) && OldFrame(path)) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", path,
        "' was written by an older tern (FNV-1a checksums) and cannot be "
        "resumed by this one"));
  }
  if (!message.ok()) return message.status();
  tern::v1::WorkerCheckpoint checkpoint;
  if (!checkpoint.ParseFromString(*message)) {
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

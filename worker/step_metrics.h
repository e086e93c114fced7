// The per-step JSONL record of `tern worker` (--metrics_out; DESIGN section
// 8), as the training loop fills it, and the writer of its file. The
// record's JSON schema (field names, meanings, what absent means) is
// common/records/step_record.h, which `tern launch` reads with too.
#ifndef TERN_WORKER_STEP_METRICS_H_
#define TERN_WORKER_STEP_METRICS_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tern::worker {

struct StepRecord {
  uint32_t worker = 0;
  uint64_t step = 0;
  double loss = 0;
  double lr = 0;
  uint64_t push_bytes = 0;
  uint64_t pull_bytes = 0;
  uint64_t push_msg_bytes = 0;
  uint64_t pull_msg_bytes = 0;
  uint64_t fp32_bytes = 0;
  double compute_s = 0;
  double encode_s = 0;
  double network_s = 0;
  double decode_s = 0;
  // The step's test-set evaluation, 0 without one; part of wall_s, which
  // is the time since training began when the record is written.
  double eval_s = 0;
  double wall_s = 0;
  std::optional<double> test_accuracy;
  std::optional<double> test_loss;
  std::optional<uint64_t> param_checksum;
  bool final = false;
};

// One line of JSON, without the newline (records::StepRecordLine of the
// record, its checksum as "0x" + 16 hex digits).
std::string StepRecordJson(const StepRecord& record);

// Appends records to a file, one line each, flushed per record so a reader
// (tern launch) sees progress and a crash loses at most one line.
// Not thread-safe: one training loop writes.
class MetricsWriter {
 public:
  // Creates or truncates `path` (appends to it with `append`: a worker
  // resumed from a checkpoint continues its records). INVALID_ARGUMENT
  // naming the path (and the system's reason) when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(
      const std::string& path, bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // INTERNAL naming the path when the write fails (disk full).
  absl::Status Write(const StepRecord& record);

 private:
  MetricsWriter(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}

  std::string path_;
  std::FILE* file_;  // owned; closed by the destructor
};

}  // namespace tern::worker

#endif  // TERN_WORKER_STEP_METRICS_H_

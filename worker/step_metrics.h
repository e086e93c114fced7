// The per-step JSONL record of `tern worker` (--metrics_out; DESIGN section
// 8), as the training loop fills it, and the writer of its file. The
// record's JSON schema (field names, meanings, what absent means) is
// common/records/step_record.h, which `tern launch` reads with too.
#ifndef TERN_WORKER_STEP_METRICS_H_
#define TERN_WORKER_STEP_METRICS_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/records/step_record.h"

namespace tern::worker {

// The record itself is records::StepRecord: one struct from the training
// loop to the file and back (tern launch reads it with ParseStepRecord).
using StepRecord = records::StepRecord;

// One line of JSON, without the newline: records::StepRecordLine.
inline std::string StepRecordJson(const StepRecord& record) {
  return records::StepRecordLine(record);
}

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

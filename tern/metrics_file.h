// Reading the per-step JSONL records that `tern worker` writes to
// --metrics_out (the contract is in common/records/step_record.h): `tern launch`
// follows worker 0's file for its progress display and reads every worker's
// file for the run summary, with the same lenient reader: a worker that
// crashed mid-line must not cost the summary of the lines before.
#ifndef TERN_TERN_METRICS_FILE_H_
#define TERN_TERN_METRICS_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/records/step_record.h"

namespace tern {

// One record: the schema of common/records/step_record.h.
using MetricsRecord = records::StepRecord;

// Parses one line (records::ParseStepRecord): INVALID_ARGUMENT when it is
// not a JSON object or a required field is missing or has the wrong type.
// Unknown fields are ignored: the worker may add more.
absl::StatusOr<MetricsRecord> ParseMetricsLine(absl::string_view line);

// Follows a file that another process appends to. A line counts once its
// newline is there; a file that does not exist yet reads as empty.
class MetricsTail {
 public:
  explicit MetricsTail(std::string path) : path_(std::move(path)) {}

  // The records completed since the last call. Lines that do not parse are
  // skipped and counted in bad_lines() (a reader must not stop a job).
  std::vector<MetricsRecord> ReadNew();
  int64_t bad_lines() const { return bad_lines_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
  int64_t bad_lines_ = 0;
};

}  // namespace tern

#endif  // TERN_TERN_METRICS_FILE_H_

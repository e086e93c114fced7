// The per-step JSONL record of `tern worker` (--metrics_out; DESIGN section
// 8): one JSON object per line, written by worker/step_metrics.h, read by
// `tern launch` (tern/metrics_file.h), the tests and the scripts under
// docs/. This file is the schema: field names and meanings are a contract.
//
//   worker, step              who and which step (from 0)
//   loss, lr                  the local batch loss (null on a step a
//                             worker let in again caught up on without a
//                             batch: worker/join.h) and the step's rate
//   push_bytes, pull_bytes    codec payload bytes (data + 4 per scaler),
//                             summed over all shards for this step
//   push_msg_bytes,           serialized sizes of the ShareScalers and
//   pull_msg_bytes            PushPull requests / responses
//   fp32_bytes                4 * number of parameters (what fp32 would send)
//   compute_s, encode_s,      seconds spent in forward+backward, in
//   network_s, decode_s       statistics+encoding, waiting for the shards,
//                             decoding+optimizer
//   eval_s                    the step's test-set evaluation (part of wall_s)
//   wall_s                    seconds since training began
//   test_accuracy, test_loss  only when the test set was evaluated
//   param_checksum            only when computed: "0x" + 16 hex digits
//                             (common/checksum.h's FormatChecksum; held
//                             in memory as the number)
//   final                     true on the last record of a run (else absent)
//
// Non-finite numbers (which JSON cannot carry) are written as null and read
// back as NaN.
#ifndef TERN_COMMON_RECORDS_STEP_RECORD_H_
#define TERN_COMMON_RECORDS_STEP_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tern::records {

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

// One line of JSON, without the newline, fields in the order above.
std::string StepRecordLine(const StepRecord& record);

// Parses one line. INVALID_ARGUMENT naming the field when the line is not a
// JSON object or a required field ("worker", "step", "loss", "push_bytes",
// "pull_bytes", "fp32_bytes", "wall_s") is missing or has the wrong type;
// counts must be non-negative integers, and "param_checksum", when present,
// must be a string ParseChecksum accepts. The other fields may be absent
// (0, or unset for the optional ones); unknown fields are ignored, so a
// writer may add more.
absl::StatusOr<StepRecord> ParseStepRecord(absl::string_view line);

}  // namespace tern::records

#endif  // TERN_COMMON_RECORDS_STEP_RECORD_H_

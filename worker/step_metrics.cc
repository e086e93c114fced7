#include "worker/step_metrics.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/records/step_record.h"
#include "worker/fingerprint.h"

namespace tern::worker {

std::string StepRecordJson(const StepRecord& r) {
  records::StepRecord out;
  out.worker = r.worker;
  out.step = r.step;
  out.loss = r.loss;
  out.lr = r.lr;
  out.push_bytes = r.push_bytes;
  out.pull_bytes = r.pull_bytes;
  out.push_msg_bytes = r.push_msg_bytes;
  out.pull_msg_bytes = r.pull_msg_bytes;
  out.fp32_bytes = r.fp32_bytes;
  out.compute_s = r.compute_s;
  out.encode_s = r.encode_s;
  out.network_s = r.network_s;
  out.decode_s = r.decode_s;
  out.eval_s = r.eval_s;
  out.wall_s = r.wall_s;
  out.test_accuracy = r.test_accuracy;
  out.test_loss = r.test_loss;
  if (r.param_checksum.has_value()) {
    out.param_checksum = FormatChecksum(*r.param_checksum);
  }
  out.final = r.final;
  return records::StepRecordLine(out);
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(
    const std::string& path, bool append) {
  std::FILE* file = std::fopen(path.c_str(), append ? "a" : "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open --metrics_out '", path, "': ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(path, file));
}

MetricsWriter::~MetricsWriter() { std::fclose(file_); }

absl::Status MetricsWriter::Write(const StepRecord& record) {
  const std::string line = StepRecordJson(record) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot write to --metrics_out '", path_, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace tern::worker

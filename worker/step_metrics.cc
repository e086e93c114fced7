#include "worker/step_metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/fingerprint.h"

namespace tern::worker {
namespace {

// %.9g keeps every float32 exactly and reads naturally for doubles.
std::string Number(double value) {
  if (!std::isfinite(value)) return "null";
  return absl::StrFormat("%.9g", value);
}

}  // namespace

std::string StepRecordJson(const StepRecord& r) {
  std::string out = absl::StrCat(
      "{\"worker\":", r.worker, ",\"step\":", r.step,
      ",\"loss\":", Number(r.loss), ",\"lr\":", Number(r.lr),
      ",\"push_bytes\":", r.push_bytes, ",\"pull_bytes\":", r.pull_bytes,
      ",\"push_msg_bytes\":", r.push_msg_bytes,
      ",\"pull_msg_bytes\":", r.pull_msg_bytes,
      ",\"fp32_bytes\":", r.fp32_bytes, ",\"compute_s\":", Number(r.compute_s),
      ",\"encode_s\":", Number(r.encode_s),
      ",\"network_s\":", Number(r.network_s),
      ",\"decode_s\":", Number(r.decode_s), ",\"eval_s\":", Number(r.eval_s),
      ",\"wall_s\":", Number(r.wall_s));
  if (r.test_accuracy.has_value()) {
    absl::StrAppend(&out, ",\"test_accuracy\":", Number(*r.test_accuracy));
  }
  if (r.test_loss.has_value()) {
    absl::StrAppend(&out, ",\"test_loss\":", Number(*r.test_loss));
  }
  if (r.param_checksum.has_value()) {
    absl::StrAppend(&out, ",\"param_checksum\":\"",
                    FormatChecksum(*r.param_checksum), "\"");
  }
  if (r.final) absl::StrAppend(&out, ",\"final\":true");
  out.push_back('}');
  return out;
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

#include "worker/step_metrics.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tern::worker {

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

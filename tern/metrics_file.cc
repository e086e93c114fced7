#include "tern/metrics_file.h"

#include <fstream>
#include <utility>

namespace tern {

absl::StatusOr<MetricsRecord> ParseMetricsLine(absl::string_view line) {
  return records::ParseStepRecord(line);
}

std::vector<MetricsRecord> MetricsTail::ReadNew() {
  std::vector<MetricsRecord> records;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return records;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<uint64_t>(size) < offset_) {
    // Truncated or replaced: start over.
    offset_ = 0;
    partial_.clear();
  }
  if (static_cast<uint64_t>(size) == offset_) return records;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string bytes(static_cast<size_t>(size) - offset_, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  offset_ += bytes.size();
  partial_ += bytes;
  size_t start = 0;
  for (size_t newline = partial_.find('\n', start);
       newline != std::string::npos; newline = partial_.find('\n', start)) {
    absl::string_view line(partial_.data() + start, newline - start);
    start = newline + 1;
    if (line.empty()) continue;
    absl::StatusOr<MetricsRecord> record = ParseMetricsLine(line);
    if (record.ok()) {
      records.push_back(*std::move(record));
    } else {
      ++bad_lines_;
    }
  }
  partial_.erase(0, start);
  return records;
}

}  // namespace tern

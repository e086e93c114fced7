#include "tern/geo_report.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace tern {
namespace {

// The unsigned number that ends right before `suffix` in `line`.
std::optional<uint64_t> NumberBefore(absl::string_view line,
                                     absl::string_view suffix) {
  const size_t at = line.rfind(suffix);
  if (at == absl::string_view::npos) return std::nullopt;
  size_t begin = at;
  while (begin > 0 && absl::ascii_isdigit(line[begin - 1])) --begin;
  uint64_t value = 0;
  if (begin == at ||
      !absl::SimpleAtoi(line.substr(begin, at - begin), &value)) {
    return std::nullopt;
  }
  return value;
}

bool IsChecksumAt(absl::string_view line, size_t at) {
  if (line.size() < at + 18 || line.substr(at, 2) != "0x") return false;
  for (size_t i = at + 2; i < at + 18; ++i) {
    if (!absl::ascii_isxdigit(line[i])) return false;
  }
  // Exactly 16 digits: not the start of a longer number.
  return line.size() == at + 18 || !absl::ascii_isxdigit(line[at + 18]);
}

}  // namespace

std::optional<TargetReached> TimeToTarget(
    const std::vector<MetricsRecord>& reference, double target) {
  double eval_s = 0;
  for (const MetricsRecord& record : reference) {
    eval_s += record.eval_s;
    if (record.test_accuracy.has_value() && *record.test_accuracy >= target) {
      return TargetReached{record.step, record.wall_s - eval_s};
    }
  }
  return std::nullopt;
}

WanBytes WorkerWanBytes(
    const std::vector<std::vector<MetricsRecord>>& per_worker) {
  WanBytes bytes;
  for (const std::vector<MetricsRecord>& worker : per_worker) {
    for (const MetricsRecord& record : worker) {
      bytes.up += record.push_msg_bytes;
      bytes.down += record.pull_msg_bytes;
    }
  }
  return bytes;
}

std::optional<LpsWanBytes> LpsLogWanBytes(
    const std::vector<std::string>& log_lines) {
  for (auto it = log_lines.rbegin(); it != log_lines.rend(); ++it) {
    if (!absl::StrContains(*it, "final synchronization done")) continue;
    const std::optional<uint64_t> up = NumberBefore(*it, " B up");
    const std::optional<uint64_t> down = NumberBefore(*it, " B down");
    if (!up.has_value() || !down.has_value()) break;
    return LpsWanBytes{{static_cast<double>(*up), static_cast<double>(*down)},
                       true};
  }
  LpsWanBytes sum;
  bool any = false;
  for (const std::string& line : log_lines) {
    if (!absl::StrContains(line, "] round ") ||
        !absl::StrContains(line, ": sent ") ||
        absl::StrContains(line, "in all")) {
      continue;
    }
    const std::optional<uint64_t> up = NumberBefore(line, " B up");
    const std::optional<uint64_t> down = NumberBefore(line, " B down");
    if (!up.has_value() || !down.has_value()) continue;
    sum.bytes.up += static_cast<double>(*up);
    sum.bytes.down += static_cast<double>(*down);
    any = true;
  }
  if (!any) return std::nullopt;
  return sum;
}

std::optional<WanBytes> GlobalServerWanBytes(
    const std::vector<std::string>& log_lines, uint32_t datacenters) {
  for (auto it = log_lines.rbegin(); it != log_lines.rend(); ++it) {
    if (!absl::StrContains(*it, "stopped at round")) continue;
    const std::optional<uint64_t> in = NumberBefore(*it, " bytes in");
    const std::optional<uint64_t> out = NumberBefore(*it, " bytes out");
    if (!in.has_value() || !out.has_value()) return std::nullopt;
    return WanBytes{static_cast<double>(*in), static_cast<double>(datacenters) *
                                                  static_cast<double>(*out)};
  }
  return std::nullopt;
}

std::string LastLpsChecksum(const std::vector<std::string>& log_lines) {
  for (auto it = log_lines.rbegin(); it != log_lines.rend(); ++it) {
    const absl::string_view line = *it;
    if (!absl::StrContains(line, "checksum")) continue;
    for (size_t at = line.size(); at-- > 0;) {
      if (IsChecksumAt(line, at)) return std::string(line.substr(at, 18));
    }
    return "";
  }
  return "";
}

std::vector<std::string> ReadLogLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace tern

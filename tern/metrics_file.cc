#include "tern/metrics_file.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace tern {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;

const Value* Find(const Struct& object, const std::string& key) {
  auto it = object.fields().find(key);
  return it == object.fields().end() ? nullptr : &it->second;
}

absl::Status Missing(const std::string& key, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("metrics record: \"", key, "\" is missing or not ", what));
}

// A required number; null reads as NaN when `null_ok` (the worker writes
// non-finite numbers as null).
absl::StatusOr<double> Number(const Struct& object, const std::string& key,
                              bool null_ok = false) {
  const Value* value = Find(object, key);
  if (value != nullptr && value->kind_case() == Value::kNumberValue) {
    return value->number_value();
  }
  if (null_ok && value != nullptr && value->kind_case() == Value::kNullValue) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return Missing(key, "a number");
}

// A count (step, worker id): a non-negative integer.
absl::StatusOr<uint64_t> Count(const Struct& object, const std::string& key) {
  absl::StatusOr<double> number = Number(object, key);
  if (!number.ok()) return number.status();
  if (!(*number >= 0) || *number != std::floor(*number) || *number > 9e15) {
    return Missing(key, "a non-negative integer");
  }
  return static_cast<uint64_t>(*number);
}

std::optional<double> OptionalNumber(const Struct& object,
                                     const std::string& key) {
  const Value* value = Find(object, key);
  if (value == nullptr) return std::nullopt;
  if (value->kind_case() == Value::kNumberValue) return value->number_value();
  if (value->kind_case() == Value::kNullValue) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<MetricsRecord> ParseMetricsLine(absl::string_view line) {
  Struct object;
  google::protobuf::util::JsonParseOptions options;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &object,
      options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics record is not a JSON object: ", status.message().ToString()));
  }
  MetricsRecord record;
  absl::StatusOr<uint64_t> worker = Count(object, "worker");
  if (!worker.ok()) return worker.status();
  record.worker = static_cast<uint32_t>(*worker);
  absl::StatusOr<uint64_t> step = Count(object, "step");
  if (!step.ok()) return step.status();
  record.step = *step;
  struct Required {
    const char* key;
    double* field;
    bool null_ok;
  };
  for (const Required& required : {
           Required{"loss", &record.loss, true},
           Required{"push_bytes", &record.push_bytes, false},
           Required{"pull_bytes", &record.pull_bytes, false},
           Required{"fp32_bytes", &record.fp32_bytes, false},
           Required{"wall_s", &record.wall_s, false},
       }) {
    absl::StatusOr<double> value =
        Number(object, required.key, required.null_ok);
    if (!value.ok()) return value.status();
    *required.field = *value;
  }
  record.lr = OptionalNumber(object, "lr").value_or(0);
  record.push_msg_bytes = OptionalNumber(object, "push_msg_bytes").value_or(0);
  record.pull_msg_bytes = OptionalNumber(object, "pull_msg_bytes").value_or(0);
  record.eval_s = OptionalNumber(object, "eval_s").value_or(0);
  record.test_accuracy = OptionalNumber(object, "test_accuracy");
  record.test_loss = OptionalNumber(object, "test_loss");
  if (const Value* checksum = Find(object, "param_checksum");
      checksum != nullptr && checksum->kind_case() == Value::kStringValue) {
    record.param_checksum = checksum->string_value();
  }
  if (const Value* final = Find(object, "final");
      final != nullptr && final->kind_case() == Value::kBoolValue) {
    record.final = final->bool_value();
  }
  return record;
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

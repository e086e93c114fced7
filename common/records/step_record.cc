#include "common/records/step_record.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "nlohmann/json.hpp"

namespace tern::records {
namespace {

using Json = nlohmann::json;

// A field the schema marks required that is absent or of another type.
absl::Status Missing(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("metrics record: \"", key, "\" is missing or not ", what));
}

// A number, or NaN for null (the writer's non-finite numbers). Nothing
// when absent or of another type.
std::optional<double> NumberOrNull(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_null()) return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

absl::Status RequiredNumber(const Json& object, const char* key, bool null_ok,
                            double* out) {
  const auto it = object.find(key);
  if (it != object.end() && (it->is_number() || (null_ok && it->is_null()))) {
    *out = *NumberOrNull(object, key);
    return absl::OkStatus();
  }
  return Missing(key, "a number");
}

// A non-negative integer (JSON writers may spell 3 as 3.0).
absl::Status Count(const Json& object, const char* key, bool required,
                   uint64_t* out) {
  const auto it = object.find(key);
  if (it == object.end() && !required) return absl::OkStatus();
  if (it == object.end() || !it->is_number()) return Missing(key, "a number");
  if (it->is_number_unsigned()) {
    *out = it->get<uint64_t>();
    return absl::OkStatus();
  }
  const double value = it->get<double>();
  if (!(value >= 0) || value != std::floor(value) || value > 9e15) {
    return Missing(key, "a non-negative integer");
  }
  *out = static_cast<uint64_t>(value);
  return absl::OkStatus();
}

// "param_checksum" when present: a string in FormatChecksum's form.
absl::Status OptionalChecksum(const Json& object,
                              std::optional<uint64_t>* out) {
  const auto it = object.find("param_checksum");
  if (it == object.end()) return absl::OkStatus();
  if (!it->is_string()) return Missing("param_checksum", "a string");
  absl::StatusOr<uint64_t> checksum = ParseChecksum(it->get<std::string>());
  if (!checksum.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics record: \"param_checksum\": ", checksum.status().message()));
  }
  *out = *checksum;
  return absl::OkStatus();
}

// Non-finite numbers become null: JSON cannot carry them.
Json Number(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

}  // namespace

std::string StepRecordLine(const StepRecord& r) {
  nlohmann::ordered_json json = {
      {"worker", r.worker},
      {"step", r.step},
      {"loss", Number(r.loss)},
      {"lr", Number(r.lr)},
      {"push_bytes", r.push_bytes},
      {"pull_bytes", r.pull_bytes},
      {"push_msg_bytes", r.push_msg_bytes},
      {"pull_msg_bytes", r.pull_msg_bytes},
      {"fp32_bytes", r.fp32_bytes},
      {"compute_s", Number(r.compute_s)},
      {"encode_s", Number(r.encode_s)},
      {"network_s", Number(r.network_s)},
      {"decode_s", Number(r.decode_s)},
      {"eval_s", Number(r.eval_s)},
      {"wall_s", Number(r.wall_s)},
  };
  if (r.test_accuracy.has_value()) {
    json["test_accuracy"] = Number(*r.test_accuracy);
  }
  if (r.test_loss.has_value()) json["test_loss"] = Number(*r.test_loss);
  if (r.param_checksum.has_value()) {
    json["param_checksum"] = FormatChecksum(*r.param_checksum);
  }
  if (r.final) json["final"] = true;
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<StepRecord> ParseStepRecord(absl::string_view line) {
  const Json json = Json::parse(line.begin(), line.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return absl::InvalidArgumentError("metrics record is not a JSON object");
  }
  StepRecord record;
  uint64_t worker = 0;
  for (absl::Status status : {
           Count(json, "worker", true, &worker),
           Count(json, "step", true, &record.step),
           RequiredNumber(json, "loss", /*null_ok=*/true, &record.loss),
           Count(json, "push_bytes", true, &record.push_bytes),
           Count(json, "pull_bytes", true, &record.pull_bytes),
           Count(json, "fp32_bytes", true, &record.fp32_bytes),
           RequiredNumber(json, "wall_s", /*null_ok=*/false, &record.wall_s),
           Count(json, "push_msg_bytes", false, &record.push_msg_bytes),
           Count(json, "pull_msg_bytes", false, &record.pull_msg_bytes),
       }) {
    if (!status.ok()) return status;
  }
  if (worker > std::numeric_limits<uint32_t>::max()) {
    return Missing("worker", "a worker id");
  }
  record.worker = static_cast<uint32_t>(worker);
  for (auto [key, field] : {std::pair{"lr", &record.lr},
                            std::pair{"compute_s", &record.compute_s},
                            std::pair{"encode_s", &record.encode_s},
                            std::pair{"network_s", &record.network_s},
                            std::pair{"decode_s", &record.decode_s},
                            std::pair{"eval_s", &record.eval_s}}) {
    *field = NumberOrNull(json, key).value_or(0);
  }
  record.test_accuracy = NumberOrNull(json, "test_accuracy");
  record.test_loss = NumberOrNull(json, "test_loss");
  if (absl::Status status = OptionalChecksum(json, &record.param_checksum);
      !status.ok()) {
    return status;
  }
  if (const auto it = json.find("final"); it != json.end() && it->is_boolean()) {
    record.final = it->get<bool>();
  }
  return record;
}

}  // namespace tern::records

#include "common/records/server_report.h"

#include "absl/strings/str_cat.h"
#include "common/records/json_file.h"
#include "nlohmann/json.hpp"

namespace tern::records {

// The schemas: every member, under its own name.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LpsReport, datacenter, steps,
                                                final_sync_done,
                                                param_checksum, wan_bytes_up,
                                                wan_bytes_down)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GlobalServerReport, open_round,
                                                rounds_closed,
                                                late_submissions, duplicates,
                                                refused, holds, hold_timeouts,
                                                bytes_in, bytes_out)

namespace {

constexpr char kKind[] = "kind";

template <typename Report>
absl::Status Write(const std::string& path, const char* kind,
                   const Report& report) {
  const nlohmann::json fields = report;  // keys in name order
  nlohmann::ordered_json json = {{kKind, kind}};
  for (const auto& [key, value] : fields.items()) json[key] = value;
  return WriteJsonFile(path, json);
}

template <typename Report>
absl::StatusOr<Report> Read(const std::string& path, const char* kind) {
  absl::StatusOr<nlohmann::json> json = ReadJsonFile(path);
  if (!json.ok()) return json.status();
  const auto found = json->find(kKind);
  if (found == json->end() || *found != kind) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a report of kind \"", kind, "\""));
  }
  // nlohmann reports a field of the wrong type by throwing; it ends here.
  try {
    return json->get<Report>();
  } catch (const nlohmann::json::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", error.what()));
  }
}

}  // namespace

absl::Status WriteLpsReport(const std::string& path, const LpsReport& report) {
  return Write(path, "lps", report);
}

absl::Status WriteGlobalServerReport(const std::string& path,
                                     const GlobalServerReport& report) {
  return Write(path, "global", report);
}

absl::StatusOr<LpsReport> ReadLpsReport(const std::string& path) {
  return Read<LpsReport>(path, "lps");
}

absl::StatusOr<GlobalServerReport> ReadGlobalServerReport(
    const std::string& path) {
  return Read<GlobalServerReport>(path, "global");
}

}  // namespace tern::records

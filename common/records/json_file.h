// One JSON document per file, for the records of common/records: written
// atomically (a reader never sees half a file) and read back into a JSON
// value without exceptions escaping (bad input is a status, not a crash).
#ifndef TERN_COMMON_RECORDS_JSON_FILE_H_
#define TERN_COMMON_RECORDS_JSON_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tern::records {

// Writes `json` (2-space indented, with a final newline) to `path.tmp.<pid>`
// and renames it to `path`. INTERNAL naming the path and the system's
// reason when it cannot.
absl::Status WriteJsonFile(const std::string& path,
                           const nlohmann::ordered_json& json);

// Reads and parses `path`. NOT_FOUND when it does not exist;
// INVALID_ARGUMENT naming the path when it is not one JSON object.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace tern::records

#endif  // TERN_COMMON_RECORDS_JSON_FILE_H_

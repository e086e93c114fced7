#include "common/records/json_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/replace_file.h"

namespace tern::records {

absl::Status WriteJsonFile(const std::string& path,
                           const nlohmann::ordered_json& json) {
  // Replaces invalid UTF-8 instead of throwing: a record must not cost a
  // server its shutdown.
  const std::string text =
      json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  ReplaceFileOptions options;
  options.per_process_temporary = true;
  return ReplaceFile(path, text, options);
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no file ", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr,
                                              /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " does not hold one JSON object"));
  }
  return json;
}

}  // namespace tern::records

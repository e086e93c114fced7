#include "common/records/json_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tern::records {

absl::Status WriteJsonFile(const std::string& path,
                           const nlohmann::ordered_json& json) {
  const std::string temporary = absl::StrCat(path, ".tmp.", ::getpid());
  // Replaces invalid UTF-8 instead of throwing: a record must not cost a
  // server its shutdown.
  const std::string text =
      json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  if (file == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create ", temporary, ": ",
                                            std::strerror(errno)));
  }
  const bool written =
      std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", temporary,
                                            " to ", path, ": ",
                                            std::strerror(error)));
  }
  return absl::OkStatus();
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

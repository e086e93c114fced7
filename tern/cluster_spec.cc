#include "tern/cluster_spec.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace tern {
namespace {

// Splits "host:port" at the last colon (so "[::1]:50051" works); the port
// must be a number in [1, 65535]: a spec names where peers are, and port 0
// (pick any) cannot be dialled.
absl::Status CheckAddress(absl::string_view address, absl::string_view where) {
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port == 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": '", address, "' is not an address host:port with a port in "
        "[1, 65535]"));
  }
  return absl::OkStatus();
}

absl::string_view PortOf(absl::string_view address) {
  return address.substr(address.rfind(':') + 1);
}

}  // namespace

absl::StatusOr<v1::ClusterSpec> ParseClusterSpec(absl::string_view json,
                                                 absl::string_view source) {
  v1::ClusterSpec spec;
  google::protobuf::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &spec,
      parse_options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec ", source, ": not a valid spec (",
                     status.message().ToString(),
                     "); expected {\"shards\": [\"host:port\", ...], "
                     "\"num_workers\": N}"));
  }
  if (spec.shards().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster spec ", source, ": \"shards\" is missing or empty"));
  }
  for (int i = 0; i < spec.shards_size(); ++i) {
    absl::Status address_status = CheckAddress(
        spec.shards(i), absl::StrCat("cluster spec ", source, ": shards[", i,
                                     "]"));
    if (!address_status.ok()) return address_status;
  }
  if (spec.num_workers() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster spec ", source, ": \"num_workers\" is missing or 0"));
  }
  return spec;
}

absl::StatusOr<v1::ClusterSpec> LoadClusterSpec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message =
        absl::StrCat("cluster spec ", path, ": cannot read (",
                     std::strerror(error), ")");
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec ", path, ": read failed"));
  }
  return ParseClusterSpec(text.str(), path);
}

absl::Status ApplyClusterSpec(const v1::ClusterSpec& spec,
                              absl::string_view source,
                              const ExplicitFlags& explicit_flags,
                              server::PsOptions* options) {
  if (!explicit_flags.contains("num_shards")) {
    options->num_shards = static_cast<uint32_t>(spec.shards_size());
  }
  if (!explicit_flags.contains("num_workers")) {
    options->num_workers = spec.num_workers();
  }
  if (!explicit_flags.contains("listen")) {
    if (options->shard_index >= static_cast<uint32_t>(spec.shards_size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--shard_index=", options->shard_index, " has no entry in cluster "
          "spec ", source, ", which lists ", spec.shards_size(), " shard(s)"));
    }
    options->listen =
        absl::StrCat("0.0.0.0:", PortOf(spec.shards(options->shard_index)));
  }
  return absl::OkStatus();
}

absl::Status ApplyClusterSpec(const v1::ClusterSpec& spec,
                              absl::string_view /*source*/,
                              const ExplicitFlags& explicit_flags,
                              worker::WorkerOptions* options) {
  if (!explicit_flags.contains("ps")) {
    options->ps.assign(spec.shards().begin(), spec.shards().end());
  }
  if (!explicit_flags.contains("num_workers")) {
    options->num_workers = spec.num_workers();
  }
  return absl::OkStatus();
}

}  // namespace tern

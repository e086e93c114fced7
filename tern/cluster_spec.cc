#include "tern/cluster_spec.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

// What JSON parsing cannot check: required fields, addresses, and fields
// that exclude each other.
absl::Status CheckFields(const v1::ClusterSpec& spec,
                         absl::string_view source) {
  const std::string where = absl::StrCat("cluster spec ", source, ": ");
  if (spec.shards().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "\"shards\" is missing or empty"));
  }
  for (int i = 0; i < spec.shards_size(); ++i) {
    absl::Status address_status =
        CheckAddress(spec.shards(i), absl::StrCat(where, "shards[", i, "]"));
    if (!address_status.ok()) return address_status;
  }
  if (spec.num_workers() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "\"num_workers\" is missing or 0"));
  }
  if (spec.insecure() && !spec.tls_dir().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        "\"insecure\" with \"tls_dir\": give the folder for TLS, or "
        "insecure for plaintext, not both"));
  }
  return absl::OkStatus();
}

// A relative tls_dir names a folder beside the spec file, wherever the
// process was started: a deployment mounts the two together. Only the path
// changes: `tern certs` loads a spec to create that folder.
void ResolveTlsDir(absl::string_view spec_path, v1::ClusterSpec* spec) {
  const size_t slash = spec_path.rfind('/');
  if (spec->tls_dir().empty() || spec->tls_dir()[0] == '/' ||
      slash == absl::string_view::npos) {
    return;
  }
  spec->set_tls_dir(
      absl::StrCat(spec_path.substr(0, slash + 1), spec->tls_dir()));
}

// Checked before the folder's files are named, so that a typo is reported
// as the spec's tls_dir and not as a --tls_cert the user never gave.
absl::Status CheckTlsDir(absl::string_view tls_dir, absl::string_view source) {
  const std::string where =
      absl::StrCat("cluster spec ", source, ": tls_dir ", tls_dir);
  struct stat info;
  if (stat(std::string(tls_dir).c_str(), &info) != 0) {
    const int error = errno;
    const std::string message = absl::StrCat(where, ": ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  if (!S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " is not a folder"));
  }
  return absl::OkStatus();
}

// Names the files of `identity` ("ps-0", "worker-3": tern/certs.h's
// IdentityName) in the spec's tls_dir, and its ca.pem, where no flag names
// them.
absl::Status FillTlsFiles(const v1::ClusterSpec& spec, absl::string_view source,
                          absl::string_view identity,
                          const ExplicitFlags& explicit_flags,
                          net::TlsFiles* tls) {
  // A certificate and its key are one choice: one from a flag and the other
  // from the folder would pair a key with another identity's certificate.
  const bool fill_pair = !explicit_flags.contains("tls_cert") &&
                         !explicit_flags.contains("tls_key");
  const bool fill_ca = !explicit_flags.contains("tls_ca");
  if (spec.tls_dir().empty() || (!fill_pair && !fill_ca)) {
    return absl::OkStatus();
  }
  absl::Status dir_status = CheckTlsDir(spec.tls_dir(), source);
  if (!dir_status.ok()) return dir_status;
  const std::string folder =
      absl::StrCat(absl::StripSuffix(spec.tls_dir(), "/"), "/");
  if (fill_pair) {
    tls->cert = absl::StrCat(folder, identity, ".pem");
    tls->key = absl::StrCat(folder, identity, ".key");
  }
  if (fill_ca) tls->ca = absl::StrCat(folder, "ca.pem");
  return absl::OkStatus();
}

// Who a shard's certificate speaks for: an LPS (weightgrad, gaia) for its
// data center, a TernGrad shard for its index.
std::string ShardIdentity(const server::PsOptions& options) {
  if (options.mode == server::RunMode::kTernGrad) {
    return absl::StrCat("ps-", options.shard_index);
  }
  return absl::StrCat("lps-", options.datacenter);
}

// tls_dir and insecure for a shard. TLS files given by flag beat the spec's
// insecure (the operator asked for more than the spec); --insecure against
// the spec's tls_dir is refused, so that TLS is never dropped silently.
absl::Status ApplyShardSecurity(const v1::ClusterSpec& spec,
                                absl::string_view source,
                                const ExplicitFlags& explicit_flags,
                                server::PsOptions* options) {
  absl::Status tls_status = FillTlsFiles(spec, source, ShardIdentity(*options),
                                         explicit_flags, &options->tls);
  if (!tls_status.ok()) return tls_status;
  if (!explicit_flags.contains("insecure")) {
    options->insecure = spec.insecure() && !options->tls.any();
  } else if (options->insecure && !spec.tls_dir().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--insecure with tls_dir ", spec.tls_dir(), " of cluster spec ", source,
        ": give TLS files or --insecure, not both"));
  }
  return absl::OkStatus();
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
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster spec ", source, ": not a valid spec (",
        status.message().ToString(),
        "); expected {\"shards\": [\"host:port\", ...], \"num_workers\": N} "
        "and optionally \"tls_dir\": \"folder\" or \"insecure\": true"));
  }
  absl::Status fields_status = CheckFields(spec, source);
  if (!fields_status.ok()) return fields_status;
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
  absl::StatusOr<v1::ClusterSpec> spec = ParseClusterSpec(text.str(), path);
  if (!spec.ok()) return spec.status();
  ResolveTlsDir(path, &*spec);
  return spec;
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
  return ApplyShardSecurity(spec, source, explicit_flags, options);
}

absl::Status ApplyClusterSpec(const v1::ClusterSpec& spec,
                              absl::string_view source,
                              const ExplicitFlags& explicit_flags,
                              worker::WorkerOptions* options) {
  if (!explicit_flags.contains("ps")) {
    options->ps.assign(spec.shards().begin(), spec.shards().end());
  }
  if (!explicit_flags.contains("num_workers")) {
    options->num_workers = spec.num_workers();
  }
  return FillTlsFiles(spec, source, absl::StrCat("worker-", options->worker_id),
                      explicit_flags, &options->tls);
}

}  // namespace tern

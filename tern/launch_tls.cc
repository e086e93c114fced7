#include "tern/launch_tls.h"

#include "absl/strings/str_cat.h"
#include "tern/geo_mode.h"
#include "tern/geo_plan.h"

namespace tern {

std::string TlsDirOf(const std::string& out_dir) {
  return absl::StrCat(out_dir, "/tls");
}

absl::Status ValidateLaunchTls(const LaunchOptions& options) {
  if (options.tls && options.insecure) {
    return absl::InvalidArgumentError(
        "--tls and --insecure: choose mutual TLS or plaintext, not both");
  }
  if (options.geo.emulate_wan && !options.tls && !options.insecure) {
    return absl::InvalidArgumentError(
        "--emulate_wan: the servers listen beyond loopback, on the emulated "
        "WAN's addresses; give --tls (mutual TLS on every link) or "
        "--insecure (plaintext)");
  }
  if (!options.tls) return absl::OkStatus();
  if (absl::Status status = certs::ValidateRunId(options.job.run_id);
      !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--run_id (--tls names it in every certificate): ",
                     status.message()));
  }
  return absl::OkStatus();
}

CertsOptions LaunchCertsOptions(const LaunchOptions& resolved,
                                const std::string& tls_dir) {
  CertsOptions request;
  request.out_dir = tls_dir;
  request.run_id = resolved.job.run_id;
  request.workers = resolved.workers;
  if (UsesLps(resolved.geo.mode)) {
    request.datacenters = resolved.geo.datacenters;
    request.global = true;
  } else {
    request.shards = resolved.shards;
  }
  // The GS region's addresses of an emulated WAN (loopback is in every
  // leaf already).
  for (const std::string& host :
       DialHosts(resolved.geo.emulate_wan, kGsRegion,
                 resolved.geo.datacenters)) {
    if (host != "127.0.0.1") request.hosts.push_back(host);
  }
  // A rerun into the same --out_dir gets a fresh PKI.
  request.force = true;
  return request;
}

absl::Status WriteLaunchCerts(const LaunchOptions& resolved,
                              const std::string& tls_dir) {
  const CertsOptions request = LaunchCertsOptions(resolved, tls_dir);
  if (absl::Status status = ValidateCertsOptions(request); !status.ok()) {
    return status;
  }
  return WriteClusterCerts(request);
}

std::vector<std::string> TlsArgs(const std::string& tls_dir, certs::Role role,
                                 uint32_t id) {
  if (tls_dir.empty()) return {};
  const std::string stem =
      absl::StrCat(tls_dir, "/", certs::IdentityName({"", role, id}));
  return {absl::StrCat("--tls_cert=", stem, ".pem"),
          absl::StrCat("--tls_key=", stem, ".key"),
          absl::StrCat("--tls_ca=", tls_dir, "/ca.pem")};
}

}  // namespace tern

// `tern launch --tls`: the run's own PKI. Before any child starts, the
// launcher makes a CA and one certificate per identity it starts
// (tern/certs.h; the files of `tern certs`, tern/certs_command.h) in
// OUT/tls, and gives every child its own --tls_cert/--tls_key and the CA as
// --tls_ca, so that every link of the run is mutual TLS:
//
//   plain, baseline, terngrad   ps-<i> (shard i), worker-<g>
//   gaia, weightgrad            global, lps-<d>, worker-<g>
//
// where g is the worker's index in the whole job (0 to K*W-1 in a geo run,
// whatever --worker_id its LPS gives it). Each certificate names the
// identity tern://<--run_id>/<role>/<id> and the hosts it is dialed at:
// localhost, 127.0.0.1, ::1, and under --emulate_wan the GS region's
// addresses 10.77.<d>.1 (DialHosts, tern/geo_plan.h).
//
// The CA's key stays in OUT/tls (0600) with the rest: the PKI lives and
// dies with the run. A run with a PKI of its own passes TERN_TLS_* to each
// process instead (compose, Kubernetes).
#ifndef TERN_TERN_LAUNCH_TLS_H_
#define TERN_TERN_LAUNCH_TLS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tern/certs.h"
#include "tern/certs_command.h"
#include "tern/launch_options.h"

namespace tern {

// OUT/tls.
std::string TlsDirOf(const std::string& out_dir);

// INVALID_ARGUMENT naming the flags when --tls and --insecure are both
// given, when --emulate_wan has neither (its servers listen beyond
// loopback), or when --tls is on and the job's --run_id cannot sit in a
// certificate's URI (certs::ValidateRunId).
absl::Status ValidateLaunchTls(const LaunchOptions& options);

// The `tern certs` request for the identities a launch with these
// (resolved) options starts, into `tls_dir`, replacing what an earlier run
// left there.
CertsOptions LaunchCertsOptions(const LaunchOptions& resolved,
                                const std::string& tls_dir);

// Makes and writes them (WriteClusterCerts); the error names the file or
// the OpenSSL step.
absl::Status WriteLaunchCerts(const LaunchOptions& resolved,
                              const std::string& tls_dir);

// The flags that make a child `role`/`id` use its files in `tls_dir`:
// --tls_cert=DIR/<name>.pem, --tls_key=DIR/<name>.key, --tls_ca=DIR/ca.pem.
// None when `tls_dir` is empty (a plaintext run).
std::vector<std::string> TlsArgs(const std::string& tls_dir, certs::Role role,
                                 uint32_t id);

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_TLS_H_

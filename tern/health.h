// `tern health ADDR`: asks a role's server (a shard, an LPS, the global
// server) over grpc.health.v1.Health/Check whether it is SERVING, for
// container healthchecks and Kubernetes exec probes (deploy/).
#ifndef TERN_TERN_HEALTH_H_
#define TERN_TERN_HEALTH_H_

#include <string>

#include "absl/status/status.h"
#include "common/flags/cli_fwd.h"
#include "common/net/tls_files.h"

namespace tern {

struct HealthOptions {
  // host:port of the server.
  std::string address;
  // A fully qualified service name ("tern.v1.ParameterServer"); empty: the
  // server as a whole.
  std::string service;
  // The call's deadline, connecting included.
  double timeout_s = 5;
  // --tls_cert, --tls_key, --tls_ca (common/net/tls_flags.h): TLS to the
  // server; none: plaintext.
  net::TlsFiles tls;
};

// ADDR (positional), --service, --timeout and the TLS flags on the `health`
// subcommand.
void AddHealthFlags(CLI::App* app, HealthOptions* options);

// OK when the server answers SERVING within the deadline. Otherwise one
// line naming the address: UNAVAILABLE with the status the server gave
// (NOT_SERVING, UNKNOWN), DEADLINE_EXCEEDED or UNAVAILABLE when it did not
// answer (a TLS handshake that failed included), NOT_FOUND for a service it
// does not know; INVALID_ARGUMENT or NOT_FOUND naming the flag or file when
// the TLS flags will not do.
absl::Status CheckHealth(const HealthOptions& options);

// Runs the check: prints "ADDR: SERVING" and returns 0, or prints the
// error on stderr and returns kExitUnhealthy (common/process/exit_codes.h).
int RunHealth(const HealthOptions& options);

}  // namespace tern

#endif  // TERN_TERN_HEALTH_H_

// The flags of ServerRoleOptions, registered and checked in one place for
// every server role; each role adds its own flags beside them.
#ifndef TERN_COMMON_PROCESS_SERVER_ROLE_FLAGS_H_
#define TERN_COMMON_PROCESS_SERVER_ROLE_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "common/flags/cli_fwd.h"
#include "common/net/tls_flags.h"
#include "common/process/server_role_options.h"

namespace tern::process {

// The help of the flags whose meaning depends on the role: what its report
// holds, what must fit in a message, what its state is, and what each log
// level shows.
struct ServerRoleHelp {
  std::string report_file;
  std::string max_message_mb;
  std::string state_dir;
  std::string state_sync;
  std::string log_level;
};

// Registers --listen, --port_file, --report_file, --max_message_mb,
// --pace_mbit, --state_dir, --state_sync, --log_level, the --tls_* files,
// --insecure, --run_id and the --metrics_* flags into `*options`, which
// must outlive the parse.
void AddServerRoleFlags(CLI::App* app, ServerRoleOptions* options,
                        const ServerRoleHelp& help);

// INVALID_ARGUMENT naming the flag when --listen is not host:port,
// --run_id, --max_message_mb, --log_level or a --metrics_* flag is out of
// its range, or the TLS flags do not go together; FAILED_PRECONDITION for
// plaintext beyond loopback without --insecure. `use` says whether the
// role also connects with its TLS files (an LPS to the global server).
absl::Status ValidateServerRoleOptions(const ServerRoleOptions& options,
                                       net::TlsUse use);

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_SERVER_ROLE_FLAGS_H_

// The TLS flags every role registers (tern ps, tern worker, tern global,
// tern health): --tls_cert, --tls_key and --tls_ca, also read from
// TERN_TLS_CERT, TERN_TLS_KEY and TERN_TLS_CA (common/flags' Flag). With
// none of them a role is plaintext, as before; with any, every channel
// and server it creates is TLS (common/net/credentials.h).
#ifndef TERN_COMMON_NET_TLS_FLAGS_H_
#define TERN_COMMON_NET_TLS_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/flags/cli_fwd.h"
#include "common/net/credentials.h"
#include "common/net/tls_files.h"

namespace tern::net {

// Which ends of connections a role is: a shard and the global server
// serve; a worker and `tern health` connect; an LPS with --global does
// both.
enum class TlsUse { kServe, kConnect, kServeAndConnect };

// Registers the three flags on `app`, writing into `*files`, which must
// outlive the parse; in the --help group `group` when it is not empty.
void AddTlsFlags(CLI::App* app, TlsFiles* files,
                 const std::string& group = "");

// The rules of the three flags together, without reading the files
// (CheckSecurity does that as the role starts). INVALID_ARGUMENT naming
// the flags when
// - only one of --tls_cert and --tls_key is given;
// - a role that serves has --tls_ca without --tls_cert/--tls_key (a
//   server needs its own certificate);
// - a role that connects has TLS on but no --tls_ca to verify its server
//   against.
absl::Status ValidateTlsFlags(const TlsFiles& files, TlsUse use);

// Registers --insecure (TERN_INSECURE) on a role that listens, or that
// connects across data centers (common/net/plaintext.h), writing into
// `*insecure`.
void AddInsecureFlag(CLI::App* app, bool* insecure,
                     const std::string& group = "");

// INVALID_ARGUMENT when --insecure is given with TLS files: the operator
// asked for two things at once.
absl::Status ValidateInsecureFlag(const TlsFiles& files, bool insecure);

// Registers --run_id on a role that serves (a shard, an LPS, the global
// server), writing into `*run_id`: with --tls_ca, every caller's
// certificate must name this run (common/net/peer_identity.h).
void AddServingRunIdFlag(CLI::App* app, std::string* run_id);

// INVALID_ARGUMENT naming --run_id unless it is empty (any run the CA
// signed for) or a run id IsValidRunId accepts.
absl::Status ValidateServingRunId(absl::string_view run_id);

// The transport rules of a role that listens on `listen`:
// ValidateTlsFlags(files, use), ValidateInsecureFlag, and the plaintext
// rule for `listen` (common/net/plaintext.h: FAILED_PRECONDITION for
// plaintext beyond loopback without --insecure).
absl::Status ValidateServingTransport(const TlsFiles& files, bool insecure,
                                      TlsUse use, absl::string_view listen);

// Plaintext when no file is named (beyond loopback only with `insecure`,
// --insecure); TLS with `files` otherwise.
TransportSecurity SecurityFromFlags(const TlsFiles& files,
                                    bool insecure = false);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_TLS_FLAGS_H_

// Plaintext is explicit (DESIGN section 7): a role may listen without TLS
// on loopback, where only this machine reaches it, and anywhere else only
// when its operator said --insecure. The same rule holds for the one link
// that crosses data centers, the LPS's connection to the global server, so
// that a plaintext WAN link needs --insecure at both ends.
#ifndef TERN_COMMON_NET_PLAINTEXT_H_
#define TERN_COMMON_NET_PLAINTEXT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/net/address.h"  // IsLoopbackAddress
#include "common/net/credentials.h"

namespace tern::net {

// Whether a connection at `address` under `security` is plaintext beyond
// loopback.
bool IsPlaintextBeyondLoopback(const TransportSecurity& security,
                               absl::string_view address);

// OK unless `security` is plaintext beyond loopback without
// plaintext_allowed; then FAILED_PRECONDITION: "refusing to <action>
// <address> in plaintext: ..." naming the TLS flags and --insecure.
// `action` is "listen on" or "connect to the global server at".
absl::Status CheckPlaintext(const TransportSecurity& security,
                            absl::string_view address,
                            absl::string_view action);

// The warning a role logs once at start when it accepted plaintext beyond
// loopback (--insecure); empty when there is nothing to warn of.
std::string PlaintextWarning(const TransportSecurity& security,
                             absl::string_view address,
                             absl::string_view action);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_PLAINTEXT_H_

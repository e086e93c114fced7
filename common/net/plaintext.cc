#include "common/net/plaintext.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/net/address.h"

namespace tern::net {

bool IsPlaintextBeyondLoopback(const TransportSecurity& security,
                               absl::string_view address) {
  return security.kind == TransportSecurity::Kind::kInsecure &&
         !IsLoopbackAddress(address);
}

absl::Status CheckPlaintext(const TransportSecurity& security,
                            absl::string_view address,
                            absl::string_view action) {
  if (!IsPlaintextBeyondLoopback(security, address) ||
      security.plaintext_allowed) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to ", action, " ", address,
      " in plaintext: it is reachable from other machines. Give --tls_cert, "
      "--tls_key and --tls_ca (`tern certs` makes them), or --insecure to "
      "accept plaintext on a network you trust"));
}

std::string PlaintextWarning(const TransportSecurity& security,
                             absl::string_view address,
                             absl::string_view action) {
  if (!IsPlaintextBeyondLoopback(security, address)) return "";
  return absl::StrCat(
      "--insecure: ", action, " ", address,
      " in plaintext; anyone who reaches it can read and change this run's "
      "traffic (give --tls_cert, --tls_key and --tls_ca to secure it)");
}

}  // namespace tern::net

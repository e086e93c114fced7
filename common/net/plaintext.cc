#include "common/net/plaintext.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tern::net {
namespace {

// The host of "host:port" or "[v6]:port", without brackets.
absl::string_view HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == absl::string_view::npos ? address
                                            : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == absl::string_view::npos ? address : address.substr(0, colon);
}

}  // namespace

bool IsLoopbackAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return true;
  // gRPC's target syntax allows a scheme; dns:/// and ipv4: name hosts.
  for (absl::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(address, scheme)) address.remove_prefix(scheme.size());
  }
  const absl::string_view host = HostOf(address);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

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

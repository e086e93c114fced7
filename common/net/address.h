// What an address names: its host, and whether that host is this machine.
// Addresses are gRPC targets as tern's flags take them: "host:port",
// "[v6]:port" or "unix:path", optionally behind one of gRPC's schemes
// (dns:///, ipv4:, ipv6:).
#ifndef TERN_COMMON_NET_ADDRESS_H_
#define TERN_COMMON_NET_ADDRESS_H_

#include <sys/socket.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tern::net {

// The host of `address` without scheme, brackets or port: "10.0.0.2" for
// "dns:///10.0.0.2:5000", "::1" for "[::1]:5000". A unix: address is
// returned whole.
absl::string_view HostOfAddress(absl::string_view address);

// The 4 bytes of a numeric IPv4 address (an IPv4-mapped IPv6 one
// included) or the 16 of an IPv6 one, in network order; nullopt for a
// name or anything else.
std::optional<std::string> IpBytes(absl::string_view host);

// The same bytes of a socket's address (getpeername, getsockname); nullopt
// for a family other than AF_INET and AF_INET6.
std::optional<std::string> SocketIpBytes(const sockaddr_storage& address);

// Whether `ip` (IpBytes' form) is loopback: 127.0.0.0/8 or ::1.
bool IsLoopbackIp(absl::string_view ip);

// Whether `address` reaches only this machine: a unix socket, localhost,
// or a loopback IP (IsLoopbackIp). A wildcard (0.0.0.0, [::]), any other
// address or another name is not loopback.
bool IsLoopbackAddress(absl::string_view address);

// The numeric IP addresses of this machine's interfaces (getifaddrs), as
// inet_ntop writes them; the error names the failing call.
absl::StatusOr<std::vector<std::string>> InterfaceAddresses();

// Whether `address` is on this machine: loopback (IsLoopbackAddress), or
// a numeric IP equal to one of `interface_addresses`. A host name other
// than localhost counts as another machine: it is not looked up, because a
// lookup can wait on DNS.
bool IsOnThisHost(absl::string_view address,
                  const std::vector<std::string>& interface_addresses);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_ADDRESS_H_

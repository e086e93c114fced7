#include "common/net/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tern::net {

std::optional<std::string> SocketIpBytes(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address).sin_addr;
    return std::string(reinterpret_cast<const char*>(&v4), sizeof(v4));
  }
  if (address.ss_family != AF_INET6) return std::nullopt;
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
  const char* bytes = reinterpret_cast<const char*>(&v6);
  if (IN6_IS_ADDR_V4MAPPED(&v6)) return std::string(bytes + 12, 4);
  return std::string(bytes, sizeof(v6));
}

std::optional<std::string> IpBytes(absl::string_view host) {
  const std::string text(host);
  sockaddr_storage address{};
  if (inet_pton(AF_INET6, text.c_str(),
                &reinterpret_cast<sockaddr_in6&>(address).sin6_addr) == 1) {
    address.ss_family = AF_INET6;
  } else if (inet_pton(AF_INET, text.c_str(),
                       &reinterpret_cast<sockaddr_in&>(address).sin_addr) ==
             1) {
    address.ss_family = AF_INET;
  } else {
    return std::nullopt;
  }
  return SocketIpBytes(address);
}

bool IsLoopbackIp(absl::string_view ip) {
  if (ip.size() == 4) return static_cast<unsigned char>(ip[0]) == 127;
  static const in6_addr kLoopback = IN6ADDR_LOOPBACK_INIT;
  return ip == absl::string_view(reinterpret_cast<const char*>(&kLoopback),
                                 sizeof(kLoopback));
}

absl::string_view HostOfAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return address;
  for (absl::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(address, scheme)) address.remove_prefix(scheme.size());
  }
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == absl::string_view::npos ? address
                                            : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == absl::string_view::npos ? address : address.substr(0, colon);
}

bool IsLoopbackAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return true;
  const absl::string_view host = HostOfAddress(address);
  if (host == "localhost") return true;
  const std::optional<std::string> ip = IpBytes(host);
  return ip.has_value() && IsLoopbackIp(*ip);
}

absl::StatusOr<std::vector<std::string>> InterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::InternalError(
        absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  std::vector<std::string> addresses;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    const int family = entry->ifa_addr->sa_family;
    const void* ip = nullptr;
    if (family == AF_INET) {
      ip = &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr;
    } else if (family == AF_INET6) {
      ip = &reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr)->sin6_addr;
    } else {
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (inet_ntop(family, ip, text, sizeof(text)) != nullptr) {
      addresses.emplace_back(text);
    }
  }
  freeifaddrs(list);
  return addresses;
}

bool IsOnThisHost(absl::string_view address,
                  const std::vector<std::string>& interface_addresses) {
  if (IsLoopbackAddress(address)) return true;
  const std::optional<std::string> ip = IpBytes(HostOfAddress(address));
  if (!ip.has_value()) return false;
  for (const std::string& own : interface_addresses) {
    if (IpBytes(own) == ip) return true;
  }
  return false;
}

}  // namespace tern::net

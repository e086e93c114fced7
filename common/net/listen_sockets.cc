#include "common/net/listen_sockets.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tern::net {
namespace {

struct HostPort {
  std::string host;
  std::string port;
};

absl::StatusOr<HostPort> SplitHostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot listen on '", listen, "': expected host:port or [v6]:port"));
  }
  absl::string_view host(listen.data(), colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on '", listen, "': unclosed '['"));
  }
  return HostPort{std::string(host), std::to_string(port)};
}

using AddrInfoList = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

absl::StatusOr<AddrInfoList> Resolve(const std::string& listen,
                                     const HostPort& host_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int error =
      getaddrinfo(host_port.host.empty() ? nullptr : host_port.host.c_str(),
                  host_port.port.c_str(), &hints, &found);
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on '", listen, "': ", gai_strerror(error)));
  }
  return AddrInfoList(found, &freeaddrinfo);
}

void SetPort(sockaddr* address, int port) {
  if (address->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(address)->sin_port = htons(port);
  } else if (address->sa_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(address)->sin6_port = htons(port);
  }
}

int BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return 0;
  }
  return address.ss_family == AF_INET
             ? ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port)
             : ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
}

// One bound, listening socket for `address`, or -1 with errno set.
int BindOne(const addrinfo& address) {
  const int fd =
      socket(address.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1;
  const int off = 0;
  // A restarted server must rebind while its old connections linger in
  // TIME_WAIT; low latency as gRPC's listener (accepted sockets inherit it).
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (address.ai_family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  if (bind(fd, address.ai_addr, address.ai_addrlen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<ListenSockets> BindListenSockets(const std::string& listen) {
  absl::StatusOr<HostPort> host_port = SplitHostPort(listen);
  if (!host_port.ok()) return host_port.status();
  absl::StatusOr<AddrInfoList> addresses = Resolve(listen, *host_port);
  if (!addresses.ok()) return addresses.status();
  ListenSockets sockets;
  sockets.port = std::stoi(host_port->port);
  for (addrinfo* address = addresses->get(); address != nullptr;
       address = address->ai_next) {
    // Port 0: the first socket picks the port, the others take the same.
    SetPort(address->ai_addr, sockets.port);
    const int fd = BindOne(*address);
    if (fd < 0) {
      // A family the machine lacks (::1 where IPv6 is off) is left out,
      // and so is 0.0.0.0 once a dual-stack "::" holds the port.
      if (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL) continue;
      if (errno == EADDRINUSE && !sockets.fds.empty()) continue;
      const std::string reason = std::strerror(errno);
      CloseListenSockets(sockets);
      return absl::UnavailableError(absl::StrCat(
          "cannot listen on ", listen, " (is the port in use?): ", reason));
    }
    sockets.fds.push_back(fd);
    if (sockets.port == 0) sockets.port = BoundPort(fd);
  }
  if (sockets.fds.empty()) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, ": no address to bind"));
  }
  return sockets;
}

void CloseListenSockets(ListenSockets& sockets) {
  for (int fd : sockets.fds) close(fd);
  sockets.fds.clear();
}

}  // namespace tern::net

#include "common/net/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tern::net {
namespace {

// How often the accept thread looks at `stopping_` while no one connects.
constexpr int kPollMillis = 100;

// The peer's address without its port; an IPv4 client of a dual-stack
// socket (::ffff:10.0.0.7) as the IPv4 address it is.
std::string PeerAddress(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    return text;
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
  if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
    inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof(text));
  } else {
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

ConnectionLimits ConnectionLimitsFor(int senders) {
  const int clamped = std::clamp(senders, 1, 1 << 20);
  return {4 * clamped + 16, 8 * clamped + 64};
}

bool ConnectionCount::Admit(const std::string& peer, int fd) {
  ForgetClosed();
  if (static_cast<int>(handed_.size()) >= limits_.total ||
      Open(peer) >= limits_.per_peer) {
    return false;
  }
  struct stat status {};
  if (fstat(fd, &status) != 0) return false;
  handed_.push_back({peer, fd, status.st_dev, status.st_ino});
  return true;
}

int ConnectionCount::Open(const std::string& peer) {
  if (peer.empty()) return static_cast<int>(handed_.size());
  return static_cast<int>(
      std::count_if(handed_.begin(), handed_.end(),
                    [&](const Handed& handed) { return handed.peer == peer; }));
}

void ConnectionCount::ForgetClosed() {
  auto closed = [](const Handed& handed) {
    struct stat status {};
    return fstat(handed.fd, &status) != 0 || status.st_dev != handed.device ||
           status.st_ino != handed.inode;
  };
  handed_.erase(std::remove_if(handed_.begin(), handed_.end(), closed),
                handed_.end());
}

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Listen(
    const std::string& listen, ConnectionLimits limits, Logger logger) {
  absl::StatusOr<ListenSockets> sockets = BindListenSockets(listen);
  if (!sockets.ok()) return sockets.status();
  return std::unique_ptr<ConnectionGate>(
      new ConnectionGate(*std::move(sockets), limits, std::move(logger)));
}

ConnectionGate::ConnectionGate(ListenSockets sockets, ConnectionLimits limits,
                               Logger logger)
    : sockets_(std::move(sockets)),
      count_(limits),
      logger_(logger != nullptr ? std::move(logger) : MakeNullLogger()),
      refusals_(logger_) {}

ConnectionGate::~ConnectionGate() { Stop(); }

void ConnectionGate::Start(
    std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor) {
  acceptor_ = std::move(acceptor);
  thread_ = std::thread([this] { AcceptLoop(); });
}

void ConnectionGate::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  CloseListenSockets(sockets_);
}

void ConnectionGate::AcceptLoop() {
  std::vector<pollfd> polled;
  for (int fd : sockets_.fds) polled.push_back({fd, POLLIN, 0});
  while (!stopping_) {
    if (poll(polled.data(), polled.size(), kPollMillis) <= 0) {
      refusals_.Flush();  // the summary of the lines left out, once a minute
      continue;
    }
    for (const pollfd& listener : polled) {
      if ((listener.revents & POLLIN) != 0) AcceptAll(listener.fd);
    }
  }
}

void ConnectionGate::AcceptAll(int listener) {
  while (!stopping_) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = accept4(listener, reinterpret_cast<sockaddr*>(&address),
                           &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Hand(listener, fd, PeerAddress(address));
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      // Out of descriptors (EMFILE) most often: the next poll tries again.
      refusals_.Warn("accept", "accept failed",
                     "cannot accept a connection: {}", std::strerror(errno));
    }
    return;
  }
}

void ConnectionGate::Hand(int listener, int fd, const std::string& peer) {
  if (!count_.Admit(peer, fd)) {
    close(fd);
    refusals_.Warn(peer, "connection over the limit",
                   "closed a connection from {}: {} open from it, {} in all "
                   "(limits {} and {})",
                   peer, count_.Open(peer), count_.Open(""),
                   count_.limits().per_peer, count_.limits().total);
    return;
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters
      connection;
  connection.listener_fd = listener;
  connection.fd = fd;
  acceptor_->HandleNewConnection(&connection);
}

}  // namespace tern::net

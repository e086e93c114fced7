#include "common/net/pacing.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net/address.h"

namespace tern::net {
namespace {

bool IsTcpStream(int fd) {
  int type = 0;
  socklen_t length = sizeof(type);
  int protocol = 0;
  socklen_t protocol_length = sizeof(protocol);
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 &&
         type == SOCK_STREAM &&
         getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &protocol_length) ==
             0 &&
         protocol == IPPROTO_TCP;
}

// The numbers of this process's open descriptors that are sockets.
std::vector<int> OpenSockets() {
  std::vector<int> sockets;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return sockets;
  const int own = dirfd(dir);
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    struct stat status;
    if (fstat(static_cast<int>(fd), &status) == 0 && S_ISSOCK(status.st_mode)) {
      sockets.push_back(static_cast<int>(fd));
    }
  }
  closedir(dir);
  return sockets;
}

}  // namespace

uint32_t PacingBytesPerSecond(double mbit) {
  if (!(mbit > 0)) return 0;
  const double bytes = std::min(mbit, kMaxPaceMbit) * 1e6 / 8;
  return static_cast<uint32_t>(std::llround(bytes));
}

bool ConnectsToAnotherHost(int fd) {
  if (!IsTcpStream(fd)) return false;
  sockaddr_storage peer{};
  sockaddr_storage local{};
  socklen_t peer_length = sizeof(peer);
  socklen_t local_length = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) !=
          0) {
    return false;  // not connected (a listener), or closed meanwhile
  }
  const std::optional<std::string> peer_ip = SocketIpBytes(peer);
  const std::optional<std::string> local_ip = SocketIpBytes(local);
  return peer_ip && local_ip && !IsLoopbackIp(*peer_ip) &&
         *peer_ip != *local_ip;
}

absl::Status PaceSocket(int fd, uint32_t bytes_per_second) {
  if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &bytes_per_second,
                 sizeof(bytes_per_second)) != 0) {
    return absl::InternalError(
        absl::StrCat("setsockopt(SO_MAX_PACING_RATE) on descriptor ", fd, ": ",
                     std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> PacingOf(int fd) {
  uint32_t rate = 0;
  socklen_t length = sizeof(rate);
  if (getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, &length) != 0) {
    return absl::InternalError(
        absl::StrCat("getsockopt(SO_MAX_PACING_RATE) on descriptor ", fd, ": ",
                     std::strerror(errno)));
  }
  return rate;
}

ConnectionPacer::ConnectionPacer(uint32_t bytes_per_second,
                                 absl::Duration period, Wanted wanted)
    : bytes_per_second_(bytes_per_second),
      period_(period),
      wanted_(std::move(wanted)),
      thread_([this] { Run(); }) {}

ConnectionPacer::~ConnectionPacer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

int ConnectionPacer::PaceOpenSockets() {
  int paced = 0;
  for (const int fd : OpenSockets()) {
    const absl::StatusOr<uint32_t> now = PacingOf(fd);
    if (!now.ok() || *now == bytes_per_second_ || !wanted_(fd)) continue;
    if (PaceSocket(fd, bytes_per_second_).ok()) ++paced;
  }
  return paced;
}

void ConnectionPacer::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    PaceOpenSockets();
    lock.lock();
    wake_.wait_for(lock, absl::ToChronoNanoseconds(period_),
                   [this] { return stopping_; });
  }
}

std::unique_ptr<ConnectionPacer> PaceConnections(double mbit,
                                                 const Logger& logger) {
  const uint32_t rate = PacingBytesPerSecond(mbit);
  if (rate == 0) return nullptr;
  logger->info(
      "--pace_mbit: each connection to another host sends at most "
      "{} mbit/s",
      mbit);
  return std::make_unique<ConnectionPacer>(rate, absl::Milliseconds(100));
}

}  // namespace tern::net

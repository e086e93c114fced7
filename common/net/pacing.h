// Pacing: a cap on how fast each TCP connection to another host sends
// (--pace_mbit of `tern worker`, `tern ps` and `tern global`).
//
// Over slow links, the flows of an all-to-all exchange (a co-located
// step: every worker pushes to every other host's shard, every shard
// answers every other host's worker) share each link through one FIFO
// queue, and TCP shares it badly: bursts overflow the queue, flows back
// off unevenly, and the exchange lasts until its slowest flow is done.
// When every connection instead sends at an even share of the link it
// crosses, no queue builds and no flow waits for another (bench/README.md,
// "Paced connections"). Linux's TCP paces a socket at its
// SO_MAX_PACING_RATE whatever the queueing discipline.
//
// Connections within one host are never paced: they do not cross a link.
#ifndef TERN_COMMON_NET_PACING_H_
#define TERN_COMMON_NET_PACING_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace tern::net {

// The kernel takes a 32-bit rate in bytes per second: at most 34 Gbit/s.
inline constexpr double kMaxPaceMbit = 34000;

// --pace_mbit in bytes per second: 0 (no pacing) for 0 or less, at most
// kMaxPaceMbit's.
uint32_t PacingBytesPerSecond(double mbit);

// Whether `fd` is a connected TCP socket whose peer is on another host:
// its peer's IP address is neither loopback nor the socket's own (a
// connection to any of this host's addresses is made from that address).
// IPv4-mapped IPv6 addresses count as the IPv4 ones.
bool ConnectsToAnotherHost(int fd);

// Sets `fd`'s SO_MAX_PACING_RATE to `bytes_per_second`; the error names
// the call.
absl::Status PaceSocket(int fd, uint32_t bytes_per_second);

// The rate `fd` is paced at; UINT32_MAX when it is not (the kernel's
// default), and the error for a descriptor that is not a socket.
absl::StatusOr<uint32_t> PacingOf(int fd);

// Paces a process's connections: gRPC opens a channel's connections
// itself, and 1.51's public API gives no hook on their sockets (a socket
// mutator's interface is internal). So a thread looks through this
// process's open descriptors every `period` and paces each socket
// `wanted` accepts that is not paced yet: a new connection sends unpaced
// for at most `period`. The same scan serves a server's accepted
// connections, so that one mechanism covers every TCP connection of the
// process to another host (a scrape of the metrics endpoint too). A
// descriptor that gRPC closes during a scan fails its calls here and is
// skipped; if its number is reused meanwhile, the new socket is checked
// like any other.
class ConnectionPacer {
 public:
  using Wanted = std::function<bool(int fd)>;

  // Starts the thread, which scans at once and then every `period`.
  ConnectionPacer(uint32_t bytes_per_second, absl::Duration period,
                  Wanted wanted = ConnectsToAnotherHost);
  // Stops the thread and waits for it (at most one scan).
  ~ConnectionPacer();
  ConnectionPacer(const ConnectionPacer&) = delete;
  ConnectionPacer& operator=(const ConnectionPacer&) = delete;

  // One scan; how many sockets it paced. Public for tests.
  int PaceOpenSockets();

 private:
  void Run();

  const uint32_t bytes_per_second_;
  const absl::Duration period_;
  const Wanted wanted_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// The pacer of a role's --pace_mbit, scanning every 100 ms, and a line
// saying so in `logger`'s log; none for 0.
std::unique_ptr<ConnectionPacer> PaceConnections(double mbit,
                                                 const Logger& logger);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_PACING_H_

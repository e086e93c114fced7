// Connection limits that hold before TLS (issue 14): gRPC 1.51 has no
// limit on connections, so a stranger could open thousands, each with its
// handshake and buffers, and use up the server's file descriptors before
// any certificate is checked. A server therefore accepts its TCP
// connections itself, counts the ones it has handed to gRPC by the peer's
// address, closes those over the limits at once, and hands the others to
// gRPC (grpc::experimental::ExternalConnectionAcceptor), which runs the
// handshake and everything after as on its own listener.
#ifndef TERN_COMMON_NET_CONNECTION_GATE_H_
#define TERN_COMMON_NET_CONNECTION_GATE_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "common/net/listen_sockets.h"
#include "common/refusal_log.h"
#include "grpcpp/server_builder.h"

namespace tern::net {

struct ConnectionLimits {
  // Connections open at once from one address.
  int per_peer = 0;
  // Connections open at once from all addresses together.
  int total = 0;
};

// The limits of a server whose `senders` peers each hold a connection or
// two (one channel per server, and `tern health` or a restarted process
// beside it): per peer 4 x senders + 16, so that every sender behind one
// NAT address still fits; in total 8 x senders + 64, so that one address
// at its limit leaves room for all the others.
ConnectionLimits ConnectionLimitsFor(int senders);

// The connections handed to gRPC, by peer address. gRPC owns and closes
// the descriptors; a connection counts as open while its descriptor is
// still the same socket (same inode), so a closed one stops counting
// without gRPC telling us, even when its number is reused.
class ConnectionCount {
 public:
  explicit ConnectionCount(ConnectionLimits limits) : limits_(limits) {}

  // Counts socket `fd` from `peer` and returns true, or returns false
  // (counting nothing) when the peer or the total is at its limit.
  bool Admit(const std::string& peer, int fd);
  // Open connections of `peer` (all peers when empty).
  int Open(const std::string& peer);
  const ConnectionLimits& limits() const { return limits_; }

 private:
  struct Handed {
    std::string peer;
    int fd;
    dev_t device;
    ino_t inode;
  };
  void ForgetClosed();

  ConnectionLimits limits_;
  std::vector<Handed> handed_;
};

// Accepts on a server's listening sockets on a thread of its own.
class ConnectionGate {
 public:
  // Binds options' address (listen_sockets.h's errors).
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Listen(
      const std::string& listen, ConnectionLimits limits, Logger logger);
  // Stop().
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  int port() const { return sockets_.port; }
  // Starts accepting; every admitted connection goes to `acceptor`
  // (ServerBuilder::experimental().AddExternalConnectionAcceptor's).
  void Start(
      std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  // Stops accepting and closes the listening sockets (connections handed
  // to gRPC stay its own). Idempotent.
  void Stop();

 private:
  ConnectionGate(ListenSockets sockets, ConnectionLimits limits, Logger logger);
  void AcceptLoop();
  void AcceptAll(int listener);
  void Hand(int listener, int fd, const std::string& peer);

  ListenSockets sockets_;
  ConnectionCount count_;  // only the accept thread uses it
  Logger logger_;
  RefusalLog refusals_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace tern::net

#endif  // TERN_COMMON_NET_CONNECTION_GATE_H_

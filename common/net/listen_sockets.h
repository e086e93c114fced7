// The listening TCP sockets of a server that accepts its connections itself
// (connection_gate.h): every address a "host:port" names, bound with the
// options gRPC's own listener would use.
#ifndef TERN_COMMON_NET_LISTEN_SOCKETS_H_
#define TERN_COMMON_NET_LISTEN_SOCKETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tern::net {

// Open, non-blocking listening sockets; the caller closes them.
struct ListenSockets {
  std::vector<int> fds;
  int port = 0;
};

// Binds `listen` ("host:port" or "[v6]:port"; port 0 picks one free port
// for every address of the host). "localhost" binds both 127.0.0.1 and
// ::1, "[::]" one dual-stack socket. INVALID_ARGUMENT when the address does
// not parse or resolve; UNAVAILABLE when it cannot be bound (most often
// the port is in use: transient). No SO_REUSEPORT: a second server on the
// port must fail, not share the clients.
absl::StatusOr<ListenSockets> BindListenSockets(const std::string& listen);

// Closes every socket of `sockets` and empties it.
void CloseListenSockets(ListenSockets& sockets);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_LISTEN_SOCKETS_H_

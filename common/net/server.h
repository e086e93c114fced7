// Servers: the one place where a role listens (DESIGN section 7). Every
// server gets the credentials of common/net/credentials.h, the message
// limits, keepalive settings that match common/net/channel.h's clients,
// and grpc.health.v1.Health reporting SERVING for the server ("") and for
// each of its services by name until it shuts down.
#ifndef TERN_COMMON_NET_SERVER_H_
#define TERN_COMMON_NET_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/net/channel.h"
#include "common/net/connection_gate.h"
#include "common/net/credentials.h"
#include "common/net/health_service.h"
#include "common/net/tls_files.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace tern::net {

struct ServerOptions {
  // host:port; port 0 picks a free port (Server::port says which).
  std::string listen;
  TransportSecurity security;
  // The largest message received or sent.
  int max_message_bytes = 4 << 20;
  // Server-side pings to find clients that vanished; clients' pings are
  // accepted as often as the client keepalive of channel.h sends them.
  KeepaliveOptions keepalive;
  // What a stranger can hold before any check of ours runs (gRPC 1.51
  // checks max_message_bytes only once a message is complete, so a length
  // prefix of 2 GB followed by a stream of bytes would be buffered whole):
  // the memory gRPC's transport may hold for all connections together is a
  // grpc::ResourceQuota of TransportBytes(); past it gRPC resets the calls
  // that hold the most instead of buffering more. `senders` is how many
  // peers may each send a message of max_message_bytes at once (a shard's
  // workers, the global server's data centers).
  int senders = 1;
  // Calls open at once on one connection (a worker has at most two per
  // shard: ShareScalers and PushPull).
  int max_concurrent_streams = 16;
  // A connection that has not finished its TLS handshake by then is
  // closed.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // Where connections refused over ConnectionLimitsFor(senders)
  // (connection_gate.h) are logged, at a bounded rate; none when null.
  Logger logger;
};

// The transport memory bound Server::Start applies for `options`:
// (senders + 2) x max_message_bytes + 64 MiB, room for every sender's
// largest message with two to spare, and for the small calls beside them.
int64_t TransportBytes(const ServerOptions& options);

// A service to serve and its full name for the health service (the
// generated `tern::v1::ParameterServer::service_full_name()`).
struct ServiceEntry {
  grpc::Service* service = nullptr;
  std::string name;
};

// A started server. Owns the grpc::Server and the health service; borrows
// the services, which must outlive it.
class Server {
 public:
  // Starts serving `services` on options.listen. UNAVAILABLE when the
  // address cannot be bound (most often a previous instance still holds
  // the port: transient); FAILED_PRECONDITION for plaintext beyond
  // loopback without --insecure (common/net/plaintext.h); the error of
  // CheckSecurity (credentials.h:
  // NOT_FOUND, PERMISSION_DENIED or INVALID_ARGUMENT naming the file, a
  // configuration error) when options.security's files will not do.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options, const std::vector<ServiceEntry>& services);

  // Shutdown(zero grace) if Shutdown was not called.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound port.
  int port() const { return port_; }
  HealthService& health() { return health_; }
  // For in-process channels in tests.
  grpc::Server* grpc_server() { return server_.get(); }

  // Health turns NOT_SERVING, new calls are refused, calls in flight get
  // `grace` to finish (then they are cancelled); returns once all are
  // done. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  using Acceptor = grpc::experimental::ExternalConnectionAcceptor;
  Server() = default;
  // Binds options.listen: through gate_, whose connections go to the
  // acceptor returned, or (unix:) as a port of `builder` (no acceptor).
  absl::StatusOr<std::unique_ptr<Acceptor>> Listen(
      const ServerOptions& options,
      const std::shared_ptr<grpc::ServerCredentials>& credentials,
      grpc::ServerBuilder* builder);

  HealthService health_;
  // Accepts the TCP connections (none for a unix: address, which gRPC
  // listens on itself); stopped before server_ shuts down.
  std::unique_ptr<ConnectionGate> gate_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

// Server::Start for a role's command: logs, through options.logger when it
// is set, why the server did not start, or the warning of one that
// listens in the clear beyond loopback (plaintext.h's PlaintextWarning).
absl::StatusOr<std::unique_ptr<Server>> StartLogged(
    const ServerOptions& options, const std::vector<ServiceEntry>& services);

// The ServerOptions of a role's serving flags, one mapping for the shard,
// the LPS and the global server: --listen, TLS from --tls_* (plaintext
// beyond loopback only with --insecure; tls_flags.h's SecurityFromFlags),
// --max_message_mb, and `senders` peers that may each send their largest
// message at once (its workers, or its data centers).
ServerOptions ServerOptionsFromFlags(const std::string& listen,
                                     const TlsFiles& tls, bool insecure,
                                     uint32_t max_message_mb, int senders,
                                     Logger logger);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_SERVER_H_

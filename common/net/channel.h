// Client channels: the one place where a role opens a connection to
// another (DESIGN section 7). Every channel gets the same credentials
// (common/net/credentials.h), keepalive, message-size limits and retry
// policy, so that a change to any of them (TLS, a limit) is made here once.
#ifndef TERN_COMMON_NET_CHANNEL_H_
#define TERN_COMMON_NET_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/net/credentials.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace tern::net {

// HTTP/2 keepalive pings while calls are in flight, so that a peer that
// vanished (a killed pod, a cut WAN link) fails the calls waiting on it
// within about time + timeout instead of leaving them to their deadlines
// (gRPC issue #15889). Servers from common/net/server.h accept pings this
// often; a server built elsewhere may answer them with GOAWAY.
struct KeepaliveOptions {
  absl::Duration time = absl::Seconds(30);
  absl::Duration timeout = absl::Seconds(10);
};

// gRPC's own retries (the service config's retryPolicy, gRFC A6): an
// attempt that fails with UNAVAILABLE (a connection lost, a server
// shutting down, a push still being added) is retried with jittered
// exponential backoff, within the call's one deadline. Safe because every
// tern RPC is idempotent (DESIGN section 7). gRPC caps max_attempts at 5.
// Retries that must outlast a deadline (waiting minutes for a server to
// start) are not this: see common/net/backoff.h.
struct RetryPolicy {
  bool enabled = true;
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  double backoff_multiplier = 2;
};

struct ChannelOptions {
  // Plaintext or TLS (credentials.h); check it with
  // CheckSecurity(security, Side::kClient) first: CreateChannel cannot
  // report a missing file, whose channel would fail every handshake.
  TransportSecurity security;
  // The largest message sent or received (gRPC's limit is an int).
  int max_message_bytes = 4 << 20;
  KeepaliveOptions keepalive;
  RetryPolicy retry;
};

// The service config JSON that applies `policy` to every method of every
// service on the channel.
std::string RetryServiceConfig(const RetryPolicy& policy);

// The channel arguments of `options` (exposed for tests and for in-process
// channels, e.g. grpc::Server::InProcessChannelWithInterceptors).
grpc::ChannelArguments ChannelArgumentsFor(const ChannelOptions& options);

// A channel to `address` (host:port). Connecting is lazy: an address that
// nobody listens on yet is not an error here.
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address,
                                             const ChannelOptions& options);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_CHANNEL_H_

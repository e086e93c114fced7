#include "worker/client_options.h"

#include "common/net/peer_identity.h"
#include "common/net/tls_flags.h"

namespace tern::worker {

PsClientOptions ClientOptionsFor(const WorkerOptions& options,
                                 int max_message_bytes) {
  PsClientOptions client;
  client.rpc_timeout = absl::Seconds(options.rpc_timeout_s);
  client.join_timeout = absl::Seconds(options.join_timeout_s);
  client.server_loss_timeout = absl::Seconds(options.server_loss_timeout_s);
  client.straggler_warn = absl::Seconds(options.straggler_warn_s);
  client.push_order = ParsePushOrder(options.push_order);
  client.max_message_bytes = max_message_bytes;
  client.security = net::SecurityFromFlags(options.tls);
  if (client.security.kind == net::TransportSecurity::Kind::kTls) {
    client.security.server_verifier = net::ServerIdentityVerifier(
        {options.mode == TrainMode::kTernGrad ? net::PeerRole::kPs
                                              : net::PeerRole::kLps},
        options.run_id);
  }
  return client;
}

}  // namespace tern::worker

#include "worker/client_options.h"

#include <utility>

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

TEST(ClientOptionsForTest, TheFlagsSetTheDeadlinesAndTheOrder) {
  WorkerOptions options;
  options.rpc_timeout_s = 7;
  options.join_timeout_s = 8;
  options.server_loss_timeout_s = 9;
  options.straggler_warn_s = 3;
  options.push_order = "in_turn";

  PsClientOptions client = ClientOptionsFor(options, 12345);

  EXPECT_EQ(client.rpc_timeout, absl::Seconds(7));
  EXPECT_EQ(client.join_timeout, absl::Seconds(8));
  EXPECT_EQ(client.server_loss_timeout, absl::Seconds(9));
  EXPECT_EQ(client.straggler_warn, absl::Seconds(3));
  EXPECT_EQ(client.push_order, PushOrder::kInTurn);
  EXPECT_EQ(client.max_message_bytes, 12345);
}

TEST(ClientOptionsForTest, WithoutTlsFilesTheClientSpeaksPlaintext) {
  PsClientOptions client = ClientOptionsFor(WorkerOptions{}, 1 << 20);

  EXPECT_EQ(client.security.kind, net::TransportSecurity::Kind::kInsecure);
  EXPECT_EQ(client.security.server_verifier, nullptr);
  EXPECT_EQ(client.push_order, PushOrder::kTogether);
}

TEST(ClientOptionsForTest, EveryPushOrderHasItsName) {
  WorkerOptions options;
  for (const auto& [name, order] :
       {std::pair<const char*, PushOrder>{"together", PushOrder::kTogether},
        {"in_turn", PushOrder::kInTurn},
        {"local_last", PushOrder::kLocalLast}}) {
    options.push_order = name;
    EXPECT_EQ(ClientOptionsFor(options, 1 << 20).push_order, order) << name;
  }
}

// Under TLS every mode checks whom it dials (the role is the verifier's:
// common/net/peer_identity_test checks what it accepts).
TEST(ClientOptionsForTest, WithTlsFilesEveryModeVerifiesTheServer) {
  for (TrainMode mode : {TrainMode::kTernGrad, TrainMode::kWeightGrad}) {
    WorkerOptions options;
    options.mode = mode;
    options.tls.cert = "worker.crt";
    options.tls.key = "worker.key";
    options.tls.ca = "ca.crt";
    options.tls.refresh_s = 30;

    PsClientOptions client = ClientOptionsFor(options, 1 << 20);

    EXPECT_EQ(client.security.kind, net::TransportSecurity::Kind::kTls);
    EXPECT_NE(client.security.server_verifier, nullptr);
    EXPECT_EQ(client.security.refresh_interval, absl::Seconds(30));
  }
}

}  // namespace
}  // namespace tern::worker

#include "global/gs_service.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/captured_log.h"
#include "common/net/channel.h"
#include "common/net/credentials.h"
#include "common/net/peer_identity.h"
#include "common/net/server.h"
#include "common/net/test_certs.h"
#include "gmock/gmock.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "kernels/payload.h"

namespace tern::global {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kSeed = 5;
constexpr uint64_t kElements = 37;

// A GS (aggregator, service, server on 127.0.0.1:0) in this process, with
// a thread that ticks the aggregator as `tern global` does.
class InProcessGs {
 public:
  // `security` and `peers`: the server's TLS and who may call
  // (plaintext, nothing checked, by default).
  explicit InProcessGs(RoundAggregatorOptions options,
                       net::TransportSecurity security = {},
                       net::PeerPolicy peers = {},
                       Logger logger = MakeNullLogger()) {
    options.seed = kSeed;
    aggregator_ = *RoundAggregator::Create(options, logger);
    service_ = std::make_unique<GsService>(aggregator_.get(), logger,
                                           std::move(peers));
    net::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    server_options.security = std::move(security);
    absl::StatusOr<std::unique_ptr<net::Server>> server = net::Server::Start(
        server_options, {{service_.get(), "tern.v1.GlobalServer"}});
    if (server.ok()) {
      server_ = *std::move(server);
      port_ = server_->port();
    }
    ticker_ = std::thread([this] {
      while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
        aggregator_->Tick(absl::Now());
      }
    });
  }
  ~InProcessGs() {
    stop_.Notify();
    ticker_.join();
    aggregator_->Close(absl::UnavailableError("test GS stops"));
    if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
  }

  bool started() const { return server_ != nullptr && port_ != 0; }

  std::unique_ptr<tern::v1::GlobalServer::Stub> NewStub(
      net::TransportSecurity security = {}) const {
    // gRPC's retries (common/net) would resend a held call the service
    // answered UNAVAILABLE; these tests check the service's own answers.
    net::ChannelOptions options;
    options.retry.enabled = false;
    options.security = std::move(security);
    return tern::v1::GlobalServer::NewStub(net::CreateChannel(
        absl::StrCat("127.0.0.1:", port_), options));
  }

 private:
  std::unique_ptr<RoundAggregator> aggregator_;
  std::unique_ptr<GsService> service_;
  int port_ = 0;
  std::unique_ptr<net::Server> server_;
  absl::Notification stop_;
  std::thread ticker_;
};

RoundAggregatorOptions Options(uint32_t k) {
  RoundAggregatorOptions options;
  options.num_datacenters = k;
  return options;
}

// Every RPC of the tests has a deadline.
void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(20));
}

tern::v1::RegisterRequest Registration(uint32_t d, uint32_t k) {
  tern::v1::RegisterRequest request;
  request.set_datacenter(d);
  request.set_num_datacenters(k);
  request.set_param_spec_hash(0x42);
  request.set_param_checksum(0x43);
  request.add_chunk_elements(kElements);
  request.add_chunk_elements(3);
  request.set_update_codec(tern::v1::CODEC_TERNGRAD);
  request.set_update_layout(tern::v1::LAYOUT_TERNARY_2BIT);
  return request;
}

grpc::Status Register(tern::v1::GlobalServer::Stub* gs_client,
                      const tern::v1::RegisterRequest& request,
                      tern::v1::RegisterResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context);
  return gs_client->Register(&context, request, response);
}

grpc::Status Sync(tern::v1::GlobalServer::Stub* gs_client,
                  const tern::v1::SyncRoundRequest& request,
                  tern::v1::SyncRoundResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context);
  return gs_client->SyncRound(&context, request, response);
}

std::unique_ptr<kernels::Codec> TernGrad() {
  kernels::CodecOptions options;
  options.id = kernels::CodecId::kTernGrad;
  options.clip = 0.0f;
  options.push_layout = kernels::Layout::kTernary2Bit;
  return *kernels::MakeCodec(options);
}

std::vector<float> Ramp(uint64_t n, float scale) {
  std::vector<float> values(n);
  for (uint64_t i = 0; i < n; ++i) {
    values[i] = scale * (static_cast<float>(i % 7) - 3.0f);
  }
  return values;
}

// The plain update of data center d for chunk 0.
kernels::Payload Update(uint32_t d) {
  kernels::EncodeContext context;
  context.stream = RandomStream{kSeed, 0, 0, d};
  return *TernGrad()->Encode(Ramp(kElements, 1.0f + d), context);
}

tern::v1::SyncRoundRequest SyncRequestFor(uint32_t d, uint64_t round,
                                          bool with_update = true) {
  tern::v1::SyncRoundRequest request;
  request.set_datacenter(d);
  request.set_round(round);
  if (with_update) {
    const kernels::Payload payload = Update(d);
    tern::v1::ChunkPayload* chunk = request.add_updates();
    chunk->set_chunk_key(0);
    tern::v1::Payload* wire = chunk->mutable_payload();
    wire->set_codec(tern::v1::CODEC_TERNGRAD);
    wire->set_layout(tern::v1::LAYOUT_TERNARY_2BIT);
    wire->set_format_version(payload.format_version);
    wire->set_num_elements(payload.num_elements);
    wire->set_num_summands(payload.num_summands);
    for (const float s : payload.scalers) wire->add_scalers(s);
    wire->set_data(payload.data);
  }
  return request;
}

TEST(GsServiceTest, TwoDataCentersGetTheSameAverageAsThePlainClassGives) {
  constexpr uint32_t kK = 2;
  InProcessGs gs(Options(kK));
  ASSERT_TRUE(gs.started());
  auto gs_client = gs.NewStub();
  for (uint32_t d = 0; d < kK; ++d) {
    tern::v1::RegisterResponse reply;
    const grpc::Status status =
        Register(gs_client.get(), Registration(d, kK), &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reply.next_round(), 0u);
    EXPECT_EQ(reply.t_global_s(), 10);
    EXPECT_EQ(reply.hold_timeout_s(), 30);
    EXPECT_EQ(reply.max_lag(), 2u);
  }
  std::vector<tern::v1::SyncRoundResponse> responses(kK);
  std::vector<grpc::Status> statuses(kK);
  std::vector<std::thread> lpss;
  for (uint32_t d = 0; d < kK; ++d) {
    lpss.emplace_back([&, d] {
      auto own = gs.NewStub();
      statuses[d] = Sync(own.get(), SyncRequestFor(d, 0), &responses[d]);
    });
  }
  for (std::thread& lps : lpss) lps.join();
  for (uint32_t d = 0; d < kK; ++d) {
    ASSERT_TRUE(statuses[d].ok()) << statuses[d].error_message();
  }
  EXPECT_EQ(responses[0].SerializeAsString(), responses[1].SerializeAsString());
  const tern::v1::SyncRoundResponse& got = responses[0];
  EXPECT_EQ(got.round(), 0u);
  EXPECT_EQ(got.lagging_size(), 0);
  ASSERT_EQ(got.contributions_size(), 2);
  EXPECT_EQ(got.contributions(1).datacenter(), 1u);
  EXPECT_EQ(got.contributions(1).round(), 0u);

  // The same round through the plain class: the wire carries its bytes.
  RoundAggregatorOptions options = Options(kK);
  options.seed = kSeed;
  auto plain = *RoundAggregator::Create(options, MakeNullLogger());
  RegisterRequest registration;
  registration.num_datacenters = kK;
  registration.param_spec_hash = 0x42;
  registration.param_checksum = 0x43;
  registration.chunk_elements = {kElements, 3};
  registration.update_codec = kernels::CodecId::kTernGrad;
  for (uint32_t d = 0; d < kK; ++d) {
    registration.datacenter = d;
    ASSERT_TRUE(plain->Register(registration).ok());
  }
  RoundAnswerPtr expected;
  for (uint32_t d = 0; d < kK; ++d) {
    plain->SyncRound(SyncRequest{d, 0, {ChunkPayload{0, Update(d)}}},
                     [&](absl::StatusOr<RoundAnswerPtr> answer) {
                       ASSERT_TRUE(answer.ok());
                       expected = *answer;
                     });
  }
  ASSERT_NE(expected, nullptr);
  ASSERT_EQ(got.average_size(), 1);
  const tern::v1::Payload& wire = got.average(0).payload();
  const kernels::Payload& want = expected->average[0].payload;
  EXPECT_EQ(got.average(0).chunk_key(), 0u);
  EXPECT_EQ(wire.codec(), tern::v1::CODEC_TERNGRAD);
  EXPECT_EQ(wire.layout(), tern::v1::LAYOUT_TERNARY_2BIT);
  EXPECT_EQ(wire.format_version(), want.format_version);
  EXPECT_EQ(wire.num_elements(), kElements);
  EXPECT_EQ(wire.num_summands(), 1u);
  EXPECT_THAT(wire.scalers(), ElementsAre(want.scalers[0]));
  EXPECT_EQ(wire.data(), want.data);
}

TEST(GsServiceTest, ErrorsCrossTheWireWithTheirCodeAndMessage) {
  InProcessGs gs(Options(2));
  auto gs_client = gs.NewStub();
  tern::v1::RegisterResponse reply;
  ASSERT_TRUE(Register(gs_client.get(), Registration(0, 2), &reply).ok());

  tern::v1::RegisterRequest bad = Registration(1, 2);
  bad.set_param_spec_hash(0x99);
  grpc::Status status = Register(gs_client.get(), bad, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              HasSubstr("param spec hash 0x0000000000000099 of data center 1 "
                        "differs from 0x0000000000000042 of data center 0"));

  bad = Registration(1, 2);
  bad.set_update_codec(static_cast<tern::v1::Codec>(42));
  status = Register(gs_client.get(), bad, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("registration of data center 1: unknown codec 42"));

  tern::v1::SyncRoundResponse response;
  tern::v1::SyncRoundRequest sync = SyncRequestFor(0, 0);
  sync.mutable_updates(0)->mutable_payload()->set_layout(
      static_cast<tern::v1::Layout>(77));
  status = Sync(gs_client.get(), sync, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("round 0: chunk 0 of data center 0: unknown layout "
                        "77"));

  sync = SyncRequestFor(0, 0);
  sync.mutable_updates(0)->mutable_payload()->set_num_elements(kElements + 1);
  status = Sync(gs_client.get(), sync, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("38 elements, but the chunk has 37"));

  status = Sync(gs_client.get(), SyncRequestFor(0, 3), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("in the future"));

  status = Sync(gs_client.get(), SyncRequestFor(1, 0), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("has not registered"));
}

// A stranger repeating refused calls: the service's own refusals (a
// layout no kernel knows) count under the caller's address, the
// aggregator's (a future round) under the data center named; five lines
// of each pass, whatever the number of calls.
TEST(GsServiceTest, AThousandRefusedCallsFromOnePeerLogABoundedNumberOfLines) {
  CapturedLog log;
  InProcessGs gs(Options(2), {}, {}, log.logger());
  ASSERT_TRUE(gs.started());
  auto gs_client = gs.NewStub();
  tern::v1::RegisterResponse reply;
  ASSERT_TRUE(Register(gs_client.get(), Registration(0, 2), &reply).ok());
  tern::v1::SyncRoundRequest bad_layout = SyncRequestFor(0, 0);
  bad_layout.mutable_updates(0)->mutable_payload()->set_layout(
      static_cast<tern::v1::Layout>(77));
  const tern::v1::SyncRoundRequest future = SyncRequestFor(0, 3);
  tern::v1::SyncRoundResponse response;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(Sync(gs_client.get(), bad_layout, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    ASSERT_EQ(Sync(gs_client.get(), future, &response).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  const std::vector<std::string> warnings = log.Lines(spdlog::level::warn);
  EXPECT_EQ(warnings.size(), 10u);
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(),
                       "round 0 of data center 0 refused: round 0: chunk 0 of "
                       "data center 0: unknown layout 77"),
            5);
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(),
                       "round 3 of data center 0 refused: round 3 of data "
                       "center 0 is in the future: the GS is at round 0"),
            5);
}

TEST(GsServiceTest, ALateDataCenterGetsTheStoredAnswerAtOnce) {
  RoundAggregatorOptions options = Options(2);
  options.t_global = absl::Milliseconds(200);
  InProcessGs gs(options);
  auto gs_client = gs.NewStub();
  tern::v1::RegisterResponse reply;
  ASSERT_TRUE(Register(gs_client.get(), Registration(0, 2), &reply).ok());
  ASSERT_TRUE(Register(gs_client.get(), Registration(1, 2), &reply).ok());

  const absl::Time start = absl::Now();
  tern::v1::SyncRoundResponse first;
  grpc::Status status = Sync(gs_client.get(), SyncRequestFor(0, 0), &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200)) << "T_global";
  EXPECT_THAT(first.lagging(), ElementsAre(1u));

  tern::v1::SyncRoundResponse late;
  status = Sync(gs_client.get(), SyncRequestFor(1, 0, /*with_update=*/false),
                &late);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(late.SerializeAsString(), first.SerializeAsString());
}

TEST(GsServiceTest, AHeldCallIsAnsweredUnavailableAfterTheHoldTimeout) {
  RoundAggregatorOptions options = Options(2);
  options.t_global = absl::Milliseconds(50);
  options.max_lag = 0;
  options.hold_timeout = absl::Milliseconds(300);
  InProcessGs gs(options);
  auto gs_client = gs.NewStub();
  tern::v1::RegisterResponse reply;
  ASSERT_TRUE(Register(gs_client.get(), Registration(0, 2), &reply).ok());
  tern::v1::SyncRoundResponse response;
  ASSERT_TRUE(Sync(gs_client.get(), SyncRequestFor(0, 0), &response).ok());
  const absl::Time start = absl::Now();
  const grpc::Status status =
      Sync(gs_client.get(), SyncRequestFor(0, 1, false), &response);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(350));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("round 1 is held"),
                    HasSubstr("data center 1 (not registered)")));
}

// Under mTLS an LPS's certificate (tern://<run>/lps/<datacenter>) lets it
// register and sync only as its own data center.
TEST(GsServiceIdentityTest, AnLpsActsOnlyAsItsOwnDataCenter) {
  if (!net::TestCerts::OpensslAvailable()) GTEST_SKIP() << "no openssl";
  net::TestCerts certs(absl::StrCat(testing::TempDir(), "/gs_identity"));
  ASSERT_TRUE(certs.MakeCa("ca").ok());
  ASSERT_TRUE(certs.MakeLeaf("ca", "global", {"tern://run-1/global/0"}).ok());
  ASSERT_TRUE(certs.MakeLeaf("ca", "lps-1", {"tern://run-1/lps/1"}).ok());
  ASSERT_TRUE(certs.MakeLeaf("ca", "worker-1", {"tern://run-1/worker/1"}).ok());
  const auto as = [&](const std::string& name) {
    return net::TransportSecurity::Tls(certs.Files(name, "ca"));
  };
  InProcessGs gs(Options(2), as("global"),
                 net::PeerPolicy::For(as("global"), "run-1"));
  ASSERT_TRUE(gs.started());
  const auto lps = gs.NewStub(as("lps-1"));
  tern::v1::RegisterResponse registered;
  grpc::Status status = Register(lps.get(), Registration(0, 2), &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("wrong id"));
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::SyncRoundRequest sync;
    sync.set_datacenter(0);
    tern::v1::SyncRoundResponse answer;
    EXPECT_EQ(lps->SyncRound(&context, sync, &answer).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  status = Register(gs.NewStub(as("worker-1")).get(), Registration(1, 2),
                    &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("wrong role"));
  status = Register(lps.get(), Registration(1, 2), &registered);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace tern::global

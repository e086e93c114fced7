// WeightGrad's roles as threads of one process over loopback gRPC, each
// built through common/net as the binaries build them (DESIGN section 4):
// a global server (RoundAggregator behind GsService), K local parameter
// servers (LocalPs behind LpsService) each with its GsLink, and the
// workers' PushPull calls. Covers server/gs_link and server/lps_service,
// which the unit tests of server/ reach only below gRPC.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/checksum.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "core/wire.h"
#include "global/gs_service.h"
#include "global/round_aggregator.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_registry.h"
#include "server/gs_link.h"
#include "server/local_ps.h"
#include "server/lps_service.h"
#include "tern/v1/parameter_server.grpc.pb.h"

namespace tern {
namespace {

using ::testing::HasSubstr;

constexpr double kLr = 0.5;
constexpr absl::Duration kRpcDeadline = absl::Seconds(20);

// The model: two tensors, 33 and 5 floats, one chunk each.
const std::vector<uint64_t> kTensorElements = {33, 5};

std::unique_ptr<kernels::Codec> Fp32() {
  kernels::CodecOptions options;
  options.id = kernels::CodecId::kFp32;
  options.push_layout = kernels::Layout::kRaw;
  options.pull_layout = kernels::Layout::kRaw;
  return *kernels::MakeCodec(options);
}

std::vector<std::vector<float>> InitialWeights() {
  std::vector<std::vector<float>> weights;
  for (size_t k = 0; k < kTensorElements.size(); ++k) {
    weights.emplace_back(kTensorElements[k]);
    for (size_t i = 0; i < weights[k].size(); ++i) {
      weights[k][i] = 0.25f * static_cast<float>(i) - 1.0f + k;
    }
  }
  return weights;
}

// What LpsState::Checksum gives: the weights' bytes in chunk order.
uint64_t ChecksumOf(const std::vector<std::vector<float>>& weights) {
  Checksum hash;
  for (const std::vector<float>& w : weights) {
    hash.Update(w.data(), w.size() * sizeof(float));
  }
  return hash.value();
}

void ToWire(const std::vector<float>& values, uint32_t key,
            tern::v1::ChunkPayload* out) {
  out->set_chunk_key(key);
  core::PayloadToWire(*Fp32()->Encode(values, kernels::EncodeContext()),
                      out->mutable_payload());
}

std::vector<float> FromWire(const tern::v1::Payload& wire) {
  absl::StatusOr<kernels::Payload> payload = core::PayloadFromWire(wire);
  EXPECT_TRUE(payload.ok()) << payload.status();
  if (!payload.ok()) return {};
  std::vector<float> values(payload->num_elements);
  EXPECT_TRUE(Fp32()->Decode(*payload, absl::MakeSpan(values)).ok());
  return values;
}

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + kRpcDeadline));
}

// A gaia run (fp32 gradients and weights, momentum 0: W -= lr * g), or a
// weightgrad one whose chunks all travel in fp32 (--fp32_tensors), so the
// pushes are the same and the LPS's significance filter and its threshold
// are in play.
tern::v1::JoinRequest Join(uint32_t worker, uint32_t num_workers,
                           uint64_t steps,
                           tern::v1::Mode mode = tern::v1::MODE_GAIA) {
  tern::v1::JoinRequest request;
  request.set_worker_id(worker);
  tern::v1::RunConfig* config = request.mutable_config();
  config->set_run_id("geo-in-process");
  config->set_num_workers(num_workers);
  config->set_num_shards(1);
  config->set_partition_bytes(4 << 20);
  config->set_codec(tern::v1::CODEC_FP32);
  config->set_push_layout(tern::v1::LAYOUT_RAW);
  config->set_pull_layout(tern::v1::LAYOUT_RAW);
  config->set_mode(mode);
  if (mode == tern::v1::MODE_WEIGHTGRAD) {
    config->set_codec(tern::v1::CODEC_TERNGRAD);
    config->set_push_layout(tern::v1::LAYOUT_TERNARY_2BIT);
    config->set_pull_layout(tern::v1::LAYOUT_SUM_BITS);
    for (uint32_t k = 0; k < kTensorElements.size(); ++k) {
      config->add_fp32_chunk_keys(k);
    }
  }
  config->mutable_optimizer()->set_lr(kLr);
  config->mutable_optimizer()->set_lr_schedule("constant");
  config->mutable_optimizer()->set_lr_step_every(1);
  config->mutable_optimizer()->set_steps(steps);
  for (size_t k = 0; k < kTensorElements.size(); ++k) {
    tern::v1::TensorSpec* tensor = request.mutable_param_spec()->add_tensors();
    tensor->set_name(absl::StrCat("t", k));
    tensor->add_shape(static_cast<int64_t>(kTensorElements[k]));
    tensor->set_dtype(tern::v1::DTYPE_FLOAT32);
  }
  request.set_param_spec_hash(7);
  const std::vector<std::vector<float>> weights = InitialWeights();
  request.set_param_checksum(ChecksumOf(weights));
  if (worker == 0) {
    for (uint32_t k = 0; k < weights.size(); ++k) {
      ToWire(weights[k], k, request.add_initial_weights());
    }
  }
  return request;
}

tern::v1::PushPullRequest Push(uint32_t worker, uint64_t step, float g) {
  tern::v1::PushPullRequest request;
  request.set_worker_id(worker);
  request.set_step(step);
  for (uint32_t k = 0; k < kTensorElements.size(); ++k) {
    ToWire(std::vector<float>(kTensorElements[k], g), k, request.add_chunks());
  }
  return request;
}

// A port nothing listens on: bound once, then released.
int ClosedPort() {
  net::ServerOptions options;
  options.listen = "127.0.0.1:0";
  std::unique_ptr<net::Server> server = *net::Server::Start(options, {});
  const int port = server->port();
  server->Shutdown(absl::ZeroDuration());
  return port;
}

// The global server as `tern global` runs it, ticked every 10 ms.
class InProcessGs {
 public:
  explicit InProcessGs(uint32_t num_datacenters) {
    global::RoundAggregatorOptions options;
    options.num_datacenters = num_datacenters;
    options.seed = 3;
    options.t_global = absl::Seconds(5);
    options.hold_timeout = absl::Seconds(5);
    aggregator_ = *global::RoundAggregator::Create(options, MakeNullLogger());
    service_ = std::make_unique<global::GsService>(aggregator_.get(),
                                                   MakeNullLogger());
    net::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    server_options.max_message_bytes = 64 << 20;
    server_ = *net::Server::Start(server_options,
                                  {{service_.get(), "tern.v1.GlobalServer"}});
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
    server_->Shutdown(absl::ZeroDuration());
  }

  std::string address() const {
    return absl::StrCat("127.0.0.1:", server_->port());
  }
  global::RoundAggregator& aggregator() { return *aggregator_; }

 private:
  std::unique_ptr<global::RoundAggregator> aggregator_;
  std::unique_ptr<global::GsService> service_;
  std::unique_ptr<net::Server> server_;
  absl::Notification stop_;
  std::thread ticker_;
};

struct LpsConfig {
  uint32_t num_workers = 1;
  uint64_t steps = 4;
  uint64_t sync_every = 2;
  // Empty: no global server (a single data center).
  std::string global;
  uint32_t datacenter = 0;
  uint32_t num_datacenters = 1;
  absl::Duration sync_timeout = absl::Seconds(20);
  absl::Duration hold_limit = absl::Seconds(20);
  absl::Duration give_up = absl::Seconds(20);
  server::RunMode mode = server::RunMode::kGaia;
  // --steps_per_epoch of the LPS (0: the join's).
  uint64_t steps_per_epoch = 0;
  // What the workers' join says (OptimizerConfig.steps_per_epoch).
  uint64_t join_steps_per_epoch = 0;
};

// One local parameter server as `tern ps --mode=gaia [--global]` runs it:
// LpsService on a net::Server, ExpireWaits every 20 ms, and the GsLink.
class InProcessLps {
 public:
  explicit InProcessLps(const LpsConfig& config) {
    server::LocalPsOptions options;
    options.mode = config.mode;
    options.steps_per_epoch = config.steps_per_epoch;
    options.num_workers = config.num_workers;
    options.weight_codec = kernels::CodecId::kFp32;
    options.global = !config.global.empty();
    options.global_name = absl::StrCat("the global server at ", config.global);
    options.sync_every = config.sync_every;
    options.sync_timeout = config.sync_timeout;
    options.hold_limit = config.hold_limit;
    options.join_timeout = absl::Seconds(30);
    lps_ = *server::LocalPs::Create(options, MakeNullLogger());
    service_ =
        std::make_unique<server::LpsService>(lps_.get(), MakeNullLogger());
    net::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    server_options.max_message_bytes = 64 << 20;
    server_ = *net::Server::Start(
        server_options, {{service_.get(), "tern.v1.ParameterServer"}});
    if (options.global) {
      server::GsLinkOptions link_options;
      link_options.address = config.global;
      link_options.datacenter = config.datacenter;
      link_options.num_datacenters = config.num_datacenters;
      link_options.register_timeout = absl::Seconds(2);
      link_options.sync_margin = absl::Seconds(2);
      link_options.give_up = config.give_up;
      link_ = std::make_unique<server::GsLink>(link_options, lps_.get(),
                                               MakeNullLogger());
      link_->Start();
    }
    ticker_ = std::thread([this] {
      while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
        (void)lps_->ExpireWaits(absl::Now());
      }
    });
  }
  ~InProcessLps() {
    stop_.Notify();
    ticker_.join();
    if (link_ != nullptr) link_->Stop();
    lps_->Close(absl::UnavailableError("test LPS stops"));
    server_->Shutdown(absl::ZeroDuration());
  }

  // `retry`: gRPC's retry policy of common/net (UNAVAILABLE is retried).
  std::unique_ptr<tern::v1::ParameterServer::Stub> NewStub(
      bool retry = true) const {
    net::ChannelOptions options;
    options.max_message_bytes = 64 << 20;
    options.retry.enabled = retry;
    return tern::v1::ParameterServer::NewStub(net::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), options));
  }
  server::LocalPs& lps() { return *lps_; }
  server::GsLink& link() { return *link_; }

 private:
  std::unique_ptr<server::LocalPs> lps_;
  std::unique_ptr<server::LpsService> service_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<server::GsLink> link_;
  absl::Notification stop_;
  std::thread ticker_;
};

grpc::Status CallJoin(tern::v1::ParameterServer::Stub* lps_client,
                      const tern::v1::JoinRequest& request) {
  grpc::ClientContext context;
  SetDeadline(&context);
  tern::v1::JoinResponse response;
  return lps_client->Join(&context, request, &response);
}

grpc::Status CallPush(tern::v1::ParameterServer::Stub* lps_client,
                      const tern::v1::PushPullRequest& request,
                      tern::v1::PushPullResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context);
  return lps_client->PushPull(&context, request, response);
}

// What one worker saw: its first error, the checksum on its last answer.
struct WorkerResult {
  grpc::Status status;
  uint64_t failed_step = 0;
  uint64_t final_checksum = 0;
  // When the failed push was sent (since the join) and how long it took.
  absl::Duration failed_sent;
  absl::Duration failed_took;
};

// Worker `w` of data center `d`: joins, then pushes every step with a
// gradient of its own (so that data centers drift apart without the GS),
// pausing `pause` between pushes; stops at its first error.
WorkerResult RunWorker(const InProcessLps& lps, const LpsConfig& config,
                       uint32_t d, uint32_t w, absl::Duration pause,
                       bool retry = true) {
  WorkerResult result;
  std::unique_ptr<tern::v1::ParameterServer::Stub> lps_client = lps.NewStub(retry);
  tern::v1::JoinRequest join = Join(w, config.num_workers, config.steps,
                                    config.mode == server::RunMode::kWeightGrad
                                        ? tern::v1::MODE_WEIGHTGRAD
                                        : tern::v1::MODE_GAIA);
  join.mutable_config()->mutable_optimizer()->set_steps_per_epoch(
      config.join_steps_per_epoch);
  result.status = CallJoin(lps_client.get(), join);
  const absl::Time start = absl::Now();
  for (uint64_t t = 0; result.status.ok() && t < config.steps; ++t) {
    const float g = 0.01f * static_cast<float>((d + 1) * (w + 2) + t);
    tern::v1::PushPullResponse response;
    const absl::Time sent = absl::Now();
    result.status = CallPush(lps_client.get(), Push(w, t, g), &response);
    if (!result.status.ok()) {
      result.failed_step = t;
      result.failed_sent = sent - start;
      result.failed_took = absl::Now() - sent;
      break;
    }
    result.final_checksum = response.param_checksum();
    absl::SleepFor(pause);
  }
  return result;
}

struct GeoRun {
  uint32_t num_datacenters;
  uint32_t workers_per_datacenter;
};

class GeoInProcessTest : public ::testing::TestWithParam<GeoRun> {};

// Every worker of every data center trains to the end; the rounds reach the
// GS, every LPS finishes its final synchronization with the same weights,
// and every worker's last answer carries their checksum.
TEST_P(GeoInProcessTest, RoundsReachTheGsAndEveryLpsEndsWithTheSameWeights) {
  const GeoRun run = GetParam();
  InProcessGs gs(run.num_datacenters);
  std::vector<LpsConfig> configs(run.num_datacenters);
  std::vector<std::unique_ptr<InProcessLps>> lpss;
  for (uint32_t d = 0; d < run.num_datacenters; ++d) {
    configs[d].num_workers = run.workers_per_datacenter;
    configs[d].global = gs.address();
    configs[d].datacenter = d;
    configs[d].num_datacenters = run.num_datacenters;
    lpss.push_back(std::make_unique<InProcessLps>(configs[d]));
  }
  std::vector<std::vector<WorkerResult>> results(run.num_datacenters);
  std::vector<std::thread> workers;
  for (uint32_t d = 0; d < run.num_datacenters; ++d) {
    results[d].resize(run.workers_per_datacenter);
    for (uint32_t w = 0; w < run.workers_per_datacenter; ++w) {
      workers.emplace_back([&, d, w] {
        results[d][w] =
            RunWorker(*lpss[d], configs[d], d, w, absl::ZeroDuration());
      });
    }
  }
  for (std::thread& worker : workers) worker.join();

  const uint64_t checksum = lpss[0]->lps().checksum();
  for (uint32_t d = 0; d < run.num_datacenters; ++d) {
    for (uint32_t w = 0; w < run.workers_per_datacenter; ++w) {
      const WorkerResult& r = results[d][w];
      ASSERT_TRUE(r.status.ok())
          << "data center " << d << " worker " << w << " step "
          << r.failed_step << ": " << r.status.error_message();
      EXPECT_EQ(r.final_checksum, checksum) << d << " " << w;
    }
    server::LocalPs& lps = lpss[d]->lps();
    EXPECT_TRUE(lps.finished()) << d;
    EXPECT_EQ(lps.completed_steps(), configs[d].steps) << d;
    EXPECT_EQ(lps.checksum(), checksum) << d;
    EXPECT_GT(lps.wan_bytes_up(), 0u) << d;
    EXPECT_GT(lps.wan_bytes_down(), 0u) << d;
    EXPECT_TRUE(lpss[d]->link().status().ok()) << lpss[d]->link().status();
  }
  // Trained: the weights moved away from where they started.
  EXPECT_NE(checksum, ChecksumOf(InitialWeights()));
  // Round 0 after step 2 of 4, then the final round.
  EXPECT_EQ(gs.aggregator().stats().rounds_closed, 2u);
  EXPECT_TRUE(gs.aggregator().run_status().ok())
      << gs.aggregator().run_status();
}

INSTANTIATE_TEST_SUITE_P(
    DataCentersAndWorkers, GeoInProcessTest,
    ::testing::Values(GeoRun{1, 1}, GeoRun{1, 2}, GeoRun{2, 1},
                      GeoRun{2, 2}),
    [](const ::testing::TestParamInfo<GeoRun>& info) {
      return absl::StrCat(info.param.num_datacenters, "dc_",
                          info.param.workers_per_datacenter, "workers");
    });

// Registration keeps failing past give_up: the link reports it, naming
// the GS's address, and the LPS fails every call with it.
// WeightGrad's dynamic threshold is rescaled at every epoch boundary a
// round crosses (Appendix A.2), with the epoch the workers' join gives
// (their data set over slices x batch) unless --steps_per_epoch sets one.
struct EpochCase {
  std::string name;
  uint64_t join_steps_per_epoch;
  uint64_t flag_steps_per_epoch;
  // The epochs of the rescales, in order, in every data center.
  std::vector<uint64_t> want_epochs;
};

class GeoThresholdTest : public ::testing::TestWithParam<EpochCase> {};

TEST_P(GeoThresholdTest, WeightGradRescalesTheThresholdAtEpochBoundaries) {
  const EpochCase& c = GetParam();
  constexpr uint32_t kDataCenters = 2;
  InProcessGs gs(kDataCenters);
  std::vector<LpsConfig> configs(kDataCenters);
  std::vector<std::unique_ptr<InProcessLps>> lpss;
  for (uint32_t d = 0; d < kDataCenters; ++d) {
    configs[d].mode = server::RunMode::kWeightGrad;
    // Rounds at local steps 2, 4, 6, 8 and 10; step 12 ends the run.
    configs[d].steps = 12;
    configs[d].sync_every = 2;
    configs[d].join_steps_per_epoch = c.join_steps_per_epoch;
    configs[d].steps_per_epoch = c.flag_steps_per_epoch;
    configs[d].global = gs.address();
    configs[d].datacenter = d;
    configs[d].num_datacenters = kDataCenters;
    lpss.push_back(std::make_unique<InProcessLps>(configs[d]));
  }
  std::vector<WorkerResult> results(kDataCenters);
  std::vector<std::thread> workers;
  for (uint32_t d = 0; d < kDataCenters; ++d) {
    workers.emplace_back([&, d] {
      results[d] = RunWorker(*lpss[d], configs[d], d, 0, absl::ZeroDuration());
    });
  }
  for (std::thread& worker : workers) worker.join();

  for (uint32_t d = 0; d < kDataCenters; ++d) {
    ASSERT_TRUE(results[d].status.ok())
        << "data center " << d << " step " << results[d].failed_step << ": "
        << results[d].status.error_message();
    server::LocalPs& lps = lpss[d]->lps();
    EXPECT_TRUE(lps.finished()) << d;
    const std::vector<server::ThresholdRescale> rescales =
        lps.threshold_rescales();
    std::vector<uint64_t> epochs;
    for (const server::ThresholdRescale& r : rescales) {
      epochs.push_back(r.epoch);
      // The gradients grow step by step (momentum 0: ||v|| = ||g||), so
      // every rescale changes the threshold, by the ratios it records.
      EXPECT_GT(r.momentum_ratio, 1.0) << d << " epoch " << r.epoch;
      EXPECT_DOUBLE_EQ(r.lr_ratio, 1.0) << d;  // constant LR
      EXPECT_DOUBLE_EQ(r.new_threshold,
                       r.old_threshold * r.lr_ratio * r.momentum_ratio)
          << d << " epoch " << r.epoch;
    }
    for (size_t i = 1; i < rescales.size(); ++i) {
      EXPECT_EQ(rescales[i].old_threshold, rescales[i - 1].new_threshold);
    }
    EXPECT_EQ(epochs, c.want_epochs) << "data center " << d;
  }
  EXPECT_EQ(lpss[0]->lps().checksum(), lpss[1]->lps().checksum());
}

INSTANTIATE_TEST_SUITE_P(
    StepsPerEpoch, GeoThresholdTest,
    ::testing::Values(
        // Rounds at steps 4 and 8 open epochs 1 and 2.
        EpochCase{"FromTheJoin", 4, 0, {1, 2}},
        // The flag wins: steps 4, 6 and 10 open epochs 1, 2 and 3.
        EpochCase{"FromTheFlag", 4, 3, {1, 2, 3}},
        // A worker from before the field, no flag: never rescaled.
        EpochCase{"Unknown", 0, 0, {}}),
    [](const ::testing::TestParamInfo<EpochCase>& info) {
      return info.param.name;
    });

TEST(GeoUnreachableTest, LinkThatCannotRegisterFailsTheLpsNamingTheGs) {
  LpsConfig config;
  config.global = absl::StrCat("127.0.0.1:", ClosedPort());
  config.give_up = absl::Seconds(1);
  InProcessLps lps(config);
  std::unique_ptr<tern::v1::ParameterServer::Stub> lps_client = lps.NewStub();
  ASSERT_TRUE(CallJoin(lps_client.get(), Join(0, 1, config.steps)).ok());

  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (lps.link().status().ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const absl::Status status = lps.link().status();
  ASSERT_FALSE(status.ok()) << "the link still reports OK after 15 s";
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(config.global));

  tern::v1::PushPullResponse response;
  const grpc::Status push = CallPush(lps_client.get(), Push(0, 0, 0.1f), &response);
  EXPECT_EQ(push.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(push.error_message(), HasSubstr(config.global));
}

// The GS never answers (and the link keeps trying): once a round has
// waited sync_timeout the LPS holds its workers' answers (DESIGN section
// 4), and a held answer fails UNAVAILABLE naming the GS after hold_limit,
// long before the run's end. The worker's channel does not retry, so the
// times are the LPS's own (with common/net's retry policy the worker's
// client tries a held push up to 5 times).
TEST(GeoUnreachableTest, LpsHoldsAnswersOnceTheGsIsSilentForSyncTimeout) {
  LpsConfig config;
  config.global = absl::StrCat("127.0.0.1:", ClosedPort());
  config.steps = 400;
  config.sync_every = 1;
  config.sync_timeout = absl::Milliseconds(300);
  config.hold_limit = absl::Seconds(1);
  config.give_up = absl::Seconds(60);
  InProcessLps lps(config);
  const WorkerResult result = RunWorker(lps, config, 0, 0,
                                        absl::Milliseconds(10),
                                        /*retry=*/false);
  ASSERT_FALSE(result.status.ok()) << "every step was answered";
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << result.status.error_message();
  EXPECT_THAT(result.status.error_message(), HasSubstr(config.global));
  // Held because the GS is silent, not at the run's last step: the first
  // round was built after step 0, and answers went until it had waited
  // sync_timeout.
  EXPECT_GT(result.failed_step, 0u);
  EXPECT_LT(result.failed_step + 1, config.steps);
  EXPECT_GE(result.failed_sent, config.sync_timeout - absl::Milliseconds(50))
      << "step " << result.failed_step;
  EXPECT_LT(result.failed_sent, config.sync_timeout + absl::Seconds(1))
      << "step " << result.failed_step;
  // The held push waited hold_limit, and not much longer.
  EXPECT_GE(result.failed_took, config.hold_limit - absl::Milliseconds(50));
  EXPECT_LT(result.failed_took, config.hold_limit + absl::Seconds(1));
  // The link keeps trying: nothing it could not retry happened.
  EXPECT_TRUE(lps.link().status().ok()) << lps.link().status();
}

// One LPS without a GS, one worker, pushes over gRPC that LpsService or
// LocalPs must refuse; then a valid push is the step's first gradient.
class LpsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lps_ = std::make_unique<InProcessLps>(config_);
    stub_ = lps_->NewStub();
    ASSERT_TRUE(CallJoin(stub_.get(), Join(0, 1, config_.steps)).ok());
  }

  grpc::Status PushSpoiled(
      const std::function<void(tern::v1::PushPullRequest&)>& spoil) {
    tern::v1::PushPullRequest request = Push(0, 0, 1.0f);
    spoil(request);
    tern::v1::PushPullResponse response;
    return CallPush(stub_.get(), request, &response);
  }

  LpsConfig config_;
  std::unique_ptr<InProcessLps> lps_;
  std::unique_ptr<tern::v1::ParameterServer::Stub> stub_;
};

TEST_F(LpsServiceTest, BadPushesAreInvalidArgumentNamingTheChunk) {
  struct Bad {
    std::string name;
    std::function<void(tern::v1::PushPullRequest&)> spoil;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"format version",
       [](tern::v1::PushPullRequest& r) {
         r.mutable_chunks(1)->mutable_payload()->set_format_version(2);
       },
       "chunk 1"},
      {"element count",
       [](tern::v1::PushPullRequest& r) {
         r.mutable_chunks(1)->mutable_payload()->set_num_elements(6);
       },
       "chunk 1"},
      {"codec number no kernel knows",
       [](tern::v1::PushPullRequest& r) {
         r.mutable_chunks(0)->mutable_payload()->set_codec(
             static_cast<tern::v1::Codec>(99));
       },
       "chunk 0"},
      {"layout number no kernel knows",
       [](tern::v1::PushPullRequest& r) {
         r.mutable_chunks(1)->mutable_payload()->set_layout(
             static_cast<tern::v1::Layout>(77));
       },
       "chunk 1"},
      {"truncated data",
       [](tern::v1::PushPullRequest& r) {
         r.mutable_chunks(0)->mutable_payload()->mutable_data()->resize(3);
       },
       "chunk 0"},
  };
  for (const Bad& b : bad) {
    const grpc::Status status = PushSpoiled(b.spoil);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << b.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(b.message)) << b.name;
  }
  // Nothing of them was applied: W0 - lr * 1 after this one.
  tern::v1::PushPullResponse response;
  ASSERT_TRUE(CallPush(stub_.get(), Push(0, 0, 1.0f), &response).ok());
  const std::vector<std::vector<float>> initial = InitialWeights();
  ASSERT_EQ(response.chunks_size(), 2);
  for (int k = 0; k < 2; ++k) {
    const std::vector<float> w = FromWire(response.chunks(k).payload());
    ASSERT_EQ(w.size(), initial[k].size());
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(w[i], initial[k][i] - static_cast<float>(kLr)) << k << i;
    }
  }
}

// Requests of the wrong protocol or mode are refused, and the LPS goes on.
TEST_F(LpsServiceTest, WrongKindsOfRequestAreRefusedWithoutHarm) {
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    tern::v1::ShareScalersRequest request;
    request.set_worker_id(0);
    tern::v1::ShareScalersResponse response;
    const grpc::Status status =
        stub_->ShareScalers(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("WeightGrad"));
  }
  {
    tern::v1::JoinRequest join = Join(0, 1, config_.steps);
    join.mutable_config()->set_mode(tern::v1::MODE_TERNGRAD);
    EXPECT_EQ(CallJoin(stub_.get(), join).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    tern::v1::JoinRequest join = Join(0, 1, config_.steps);
    join.mutable_param_spec()->mutable_tensors(0)->set_dtype(
        tern::v1::DTYPE_UNSPECIFIED);
    const grpc::Status status = CallJoin(stub_.get(), join);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("t0"));
  }
  {
    const grpc::Status status = PushSpoiled(
        [](tern::v1::PushPullRequest& r) { r.set_worker_id(5); });
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << status.error_message();
  }
  tern::v1::PushPullResponse response;
  const grpc::Status ok = CallPush(stub_.get(), Push(0, 0, 1.0f), &response);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(lps_->lps().completed_steps(), 1u);
}

}  // namespace
}  // namespace tern

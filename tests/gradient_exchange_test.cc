// worker::GradientExchange (the C++ half of tern.torch) against server/'s
// real shards in this process: N exchanges in threads, each over its own
// copy of the same parameters, push different gradients; every worker gets
// the same bytes back (the average, for fp32), its replica's checksum stays
// the others', and a worker that starts from other parameters is refused
// at join with FAILED_PRECONDITION. Over codecs and worker counts.
#include "worker/gradient_exchange.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "gtest/gtest.h"
#include "tests/support/in_process_shard.h"
#include "worker/worker_flags.h"

namespace tern::worker {
namespace {

::testing::Environment* const kGrpcEnvironment =
    ::testing::AddGlobalTestEnvironment(new GrpcEnvironment);

constexpr uint32_t kShards = 2;
// Two tensors: one in 2 chunks (partition_bytes 256 = 64 floats), one odd.
constexpr int64_t kRows = 10, kCols = 9, kBias = 7;

struct Replica {
  std::vector<float> weight = std::vector<float>(kRows * kCols, 0.25f);
  std::vector<float> bias = std::vector<float>(kBias, -1.0f);
  std::vector<float> weight_grad, bias_grad;
  std::unique_ptr<GradientExchange> exchange;
};

class GradientExchangeShardsTest
    : public ::testing::TestWithParam<std::tuple<std::string, uint32_t>> {
 protected:
  void SetUp() override {
    for (uint32_t s = 0; s < kShards; ++s) {
      shards_.push_back(std::make_unique<InProcessShard>(s, kShards, workers(),
                                                         absl::Seconds(20)));
    }
  }
  uint32_t workers() const { return std::get<1>(GetParam()); }

  // `timeout_s`: every RPC's deadline and the join's budget.
  absl::StatusOr<std::unique_ptr<GradientExchange>> Make(uint32_t worker,
                                                         Replica& r,
                                                         int timeout_s = 20) {
    absl::StatusOr<WorkerOptions> options = Options(worker, timeout_s);
    if (!options.ok()) return options.status();
    return GradientExchange::Create(
        *options,
        {{"fc.weight", {kRows, kCols}, r.weight.data()},
         {"fc.bias", {kBias}, r.bias.data()}},
        MakeNullLogger());
  }

  absl::StatusOr<WorkerOptions> Options(uint32_t worker, int timeout_s) const {
    std::string ps;
    for (const auto& shard : shards_) {
      absl::StrAppend(&ps, ps.empty() ? "" : ",", "127.0.0.1:", shard->port());
    }
    return ParseWorkerArgs({"--ps=" + ps, absl::StrCat("--worker_id=", worker),
                            absl::StrCat("--num_workers=", workers()),
                            "--codec=" + std::get<0>(GetParam()),
                            "--partition_bytes=256",
                            absl::StrCat("--rpc_timeout_s=", timeout_s),
                            absl::StrCat("--join_timeout_s=", timeout_s)});
  }

  std::vector<std::unique_ptr<InProcessShard>> shards_;
};

// The gradients of worker `w` at step `step`: different per worker.
void FillGradients(uint32_t w, int step, Replica& r) {
  r.weight_grad.resize(kRows * kCols);
  r.bias_grad.resize(kBias);
  for (size_t i = 0; i < r.weight_grad.size(); ++i) {
    r.weight_grad[i] =
        0.01f * static_cast<float>((i * 7 + w * 3 + step) % 11) - 0.05f;
  }
  for (size_t i = 0; i < r.bias_grad.size(); ++i) {
    r.bias_grad[i] = 0.1f * static_cast<float>(w + 1) - 0.02f * i;
  }
}

TEST_P(GradientExchangeShardsTest, EveryWorkerGetsTheSameAverage) {
  std::vector<Replica> replicas(workers());
  for (uint32_t w = 0; w < workers(); ++w) {
    auto exchange = Make(w, replicas[w]);
    ASSERT_TRUE(exchange.ok()) << exchange.status();
    replicas[w].exchange = *std::move(exchange);
  }
  std::vector<float> sum_of_pushes(kBias, 0.0f);
  for (int step = 0; step < 3; ++step) {
    std::vector<std::thread> threads;
    std::vector<absl::Status> results(workers());
    for (uint32_t w = 0; w < workers(); ++w) {
      FillGradients(w, step, replicas[w]);
      if (step == 0) {
        for (int i = 0; i < kBias; ++i)
          sum_of_pushes[i] += replicas[w].bias_grad[i];
      }
      threads.emplace_back([&, w] {
        Replica& r = replicas[w];
        const std::vector<float*> grads = {r.weight_grad.data(),
                                           r.bias_grad.data()};
        results[w] = r.exchange->Step(grads).status();
        if (!results[w].ok()) return;
        // The caller's update: plain SGD on the returned average.
        for (size_t i = 0; i < r.weight.size(); ++i) {
          r.weight[i] -= 0.1f * r.weight_grad[i];
        }
        for (size_t i = 0; i < r.bias.size(); ++i) {
          r.bias[i] -= 0.1f * r.bias_grad[i];
        }
        results[w] = r.exchange->CheckParams().status();
      });
    }
    for (auto& thread : threads) thread.join();
    for (uint32_t w = 0; w < workers(); ++w) {
      ASSERT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w];
      EXPECT_EQ(replicas[w].weight_grad, replicas[0].weight_grad);
      EXPECT_EQ(replicas[w].bias_grad, replicas[0].bias_grad);
      EXPECT_EQ(replicas[w].exchange->Checksum(),
                replicas[0].exchange->Checksum());
    }
    if (step == 0 && std::get<0>(GetParam()) == "fp32") {
      // fp32 chunks are averaged exactly enough for a float tolerance.
      for (int i = 0; i < kBias; ++i) {
        EXPECT_NEAR(replicas[0].bias_grad[i], sum_of_pushes[i] / workers(),
                    1e-6);
      }
    }
  }
  EXPECT_EQ(replicas[0].exchange->next_step(), 3u);
}

TEST_P(GradientExchangeShardsTest, OtherParametersAreRefusedAtJoin) {
  // The join is the codec's business only through the run configuration,
  // and worker 0 waits out its join budget (2 s): one case.
  if (workers() != 2 || std::get<0>(GetParam()) != "terngrad") {
    GTEST_SKIP() << "one codec and one pair of workers are enough";
  }
  Replica first, other;
  other.bias[0] = 2.0f;
  // Worker 0 configures the run and waits at the join for worker 1, which
  // the shards refuse.
  auto a = Make(0, first, /*timeout_s=*/2);
  auto b = Make(1, other);
  ASSERT_TRUE(a.ok() && b.ok());
  std::thread waiting([&] { (*a)->Join().IgnoreError(); });
  // Worker 1 joins once every shard has taken worker 0's join.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool taken = true;
  for (const auto& shard : shards_) {
    while (shard->aggregator().joined_workers() == 0 &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    taken = taken && shard->aggregator().joined_workers() == 1;
  }
  const absl::Status refused =
      taken ? (*b)->Join() : absl::UnknownError("worker 1 did not join");
  waiting.join();
  ASSERT_TRUE(taken) << "worker 0's join did not reach every shard in 10 s";
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("checksum"), std::string::npos) << refused;
  EXPECT_FALSE((*b)->joined());
}

INSTANTIATE_TEST_SUITE_P(
    CodecsAndWorkers, GradientExchangeShardsTest,
    ::testing::Combine(::testing::Values("fp32", "terngrad", "onebit"),
                       ::testing::Values(1u, 2u, 3u)),
    [](const auto& info) {
      return absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param),
                          "_workers");
    });

}  // namespace
}  // namespace tern::worker

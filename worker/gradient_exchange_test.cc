#include "worker/gradient_exchange.h"

#include <vector>

#include "common/checksum.h"
#include "gtest/gtest.h"
#include "worker/worker_flags.h"

namespace tern::worker {
namespace {

WorkerOptions TwoShards() {
  absl::StatusOr<WorkerOptions> options =
      ParseWorkerArgs({"--ps=127.0.0.1:1,127.0.0.1:2", "--num_workers=2",
                       "--worker_id=1", "--codec=onebit"});
  EXPECT_TRUE(options.ok()) << options.status();
  return *options;
}

TEST(ParseWorkerArgsTest, TakesTheWorkersFlagsAndDefaults) {
  const WorkerOptions options = TwoShards();
  EXPECT_EQ(options.ps.size(), 2u);
  EXPECT_EQ(options.worker_id, 1u);
  EXPECT_EQ(options.codec, kernels::CodecId::kOneBit);
  EXPECT_EQ(options.rpc_timeout_s, WorkerOptions{}.rpc_timeout_s);
}

TEST(ParseWorkerArgsTest, RefusesBadValuesNamingTheFlag) {
  const absl::StatusOr<WorkerOptions> codec =
      ParseWorkerArgs({"--ps=h:1", "--codec=zip"});
  ASSERT_FALSE(codec.ok());
  EXPECT_EQ(codec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(codec.status().message().find("codec"), std::string::npos);
  const absl::StatusOr<WorkerOptions> id =
      ParseWorkerArgs({"--ps=h:1", "--worker_id=3", "--num_workers=2"});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GradientExchangeTest, ChecksumIsThatOfTheCallersBytes) {
  std::vector<float> weight = {1, 2, 3, 4, 5, 6};
  std::vector<float> bias = {0.5f, -1};
  auto exchange = GradientExchange::Create(
      TwoShards(),
      {{"fc.weight", {2, 3}, weight.data()}, {"fc.bias", {2}, bias.data()}},
      MakeNullLogger());
  ASSERT_TRUE(exchange.ok()) << exchange.status();
  Checksum expected;
  expected.Update(weight.data(), weight.size() * sizeof(float));
  expected.Update(bias.data(), bias.size() * sizeof(float));
  EXPECT_EQ((*exchange)->Checksum(), expected.value());
  // A view, not a copy: the caller's update shows.
  weight[0] = 7;
  EXPECT_NE((*exchange)->Checksum(), expected.value());
  EXPECT_FALSE((*exchange)->joined());
  EXPECT_EQ((*exchange)->next_step(), 0u);
}

TEST(GradientExchangeTest, RefusesOverlapWithTheCallersBackward) {
  std::vector<float> data(4, 0.0f);
  WorkerOptions options = TwoShards();
  options.overlap = true;
  auto exchange = GradientExchange::Create(
      options, {{"w", {4}, data.data()}}, MakeNullLogger());
  EXPECT_EQ(exchange.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(exchange.status().message().find("--overlap"), std::string::npos)
      << exchange.status();
}

TEST(GradientExchangeTest, RefusesOrdersAndNamesNoModuleHas) {
  std::vector<float> data(4, 0.0f);
  const struct {
    std::vector<HostTensor> params;
    const char* why;
  } cases[] = {
      // A module's own parameter after its submodule's.
      {{{"a.b.w", {1}, data.data()}, {"a.w", {1}, data.data()}}, "order"},
      {{{"a..w", {1}, data.data()}}, "empty part"},
      {{{"w", {1}, nullptr}}, "no data"},
      {{{"w", {-1}, data.data()}}, "negative"},
      {{{"w", {1}, data.data()}, {"w", {1}, data.data()}}, "names"},
      {{}, "no parameters"},
  };
  for (const auto& c : cases) {
    auto exchange =
        GradientExchange::Create(TwoShards(), c.params, MakeNullLogger());
    ASSERT_FALSE(exchange.ok()) << c.why;
    EXPECT_EQ(exchange.status().code(), absl::StatusCode::kInvalidArgument)
        << exchange.status();
  }
}

TEST(GradientExchangeTest, RefusesAModelOfNoElements) {
  std::vector<float> data(1, 0.0f);
  auto exchange = GradientExchange::Create(
      TwoShards(), {{"w", {0}, data.data()}, {"b", {2, 0}, data.data()}},
      MakeNullLogger());
  EXPECT_EQ(exchange.status(),
            absl::InvalidArgumentError("the model has no parameters to train "
                                       "(all of them have 0 elements)"));
}

TEST(GradientExchangeTest, StepWithTheWrongNumberOfGradientsIsRefused) {
  std::vector<float> weight(3, 0.0f);
  auto exchange = GradientExchange::Create(
      TwoShards(), {{"w", {3}, weight.data()}}, MakeNullLogger());
  ASSERT_TRUE(exchange.ok()) << exchange.status();
  std::vector<float*> none;
  EXPECT_EQ((*exchange)->Step(none).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern::worker

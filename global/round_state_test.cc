// A global server killed at any moment and restarted from its state file
// (--state_dir) answers every data center as the killed one would have:
// each scenario runs once undisturbed and once with a restart, and the
// answers must be the same bytes.
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/test_dir.h"
#include "core/fake_clock.h"
#include "global/gs_state.h"
#include "global/round_aggregator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"

namespace tern::global {
namespace {

using kernels::CodecId;
using ::testing::HasSubstr;

constexpr uint32_t kK = 2;
constexpr uint64_t kElements = 96;
constexpr absl::Duration kTGlobal = absl::Seconds(10);

// The outcome of one SyncRound call. With a fake clock every answer is
// given inside the call that releases it (SyncRound or Tick).
using Outcome = std::shared_ptr<std::optional<absl::StatusOr<RoundAnswerPtr>>>;

// One GS process: killed by Kill (the object is destroyed, its waiting
// calls dropped as a killed process's are), restarted by Start.
class Gs {
 public:
  Gs(std::string state_path, uint64_t seed = 5)
      : state_path_(std::move(state_path)), seed_(seed) {}

  absl::Status Start(uint32_t k = kK) {
    RoundAggregatorOptions options;
    options.num_datacenters = k;
    options.seed = seed_;
    options.t_global = kTGlobal;
    options.max_lag = 2;
    options.clock = clock_.AsFunction();
    options.state_path = state_path_;
    options.state_sync = false;
    absl::StatusOr<std::unique_ptr<RoundAggregator>> created =
        RoundAggregator::Create(options, MakeNullLogger());
    if (!created.ok()) return created.status();
    gs_ = *std::move(created);
    return absl::OkStatus();
  }
  void Kill() { gs_.reset(); }

  void RegisterAll() {
    for (uint32_t d = 0; d < kK; ++d) {
      RegisterRequest request;
      request.datacenter = d;
      request.num_datacenters = kK;
      request.param_spec_hash = 0xABC;
      request.param_checksum = 0x123;
      request.chunk_elements = {kElements, kElements / 2};
      request.update_codec = CodecId::kTernGrad;
      ASSERT_TRUE(gs_->Register(request).ok());
    }
  }
  // Data center d's ternary updates of round r (both chunks).
  Outcome Send(uint32_t d, uint64_t round) {
    SyncRequest request{d, round, {}};
    for (uint32_t key = 0; key < 2; ++key) {
      request.updates.push_back(ChunkPayload{key, Update(d, round, key)});
    }
    auto outcome =
        std::make_shared<std::optional<absl::StatusOr<RoundAnswerPtr>>>();
    gs_->SyncRound(request, [outcome](absl::StatusOr<RoundAnswerPtr> answer) {
      *outcome = std::move(answer);
    });
    return outcome;
  }
  void PassTGlobal() {
    clock_.Advance(kTGlobal + absl::Seconds(1));
    gs_->Tick(clock_.Now());
  }
  RoundAggregator& aggregator() { return *gs_; }

 private:
  static kernels::Payload Update(uint32_t d, uint64_t round, uint32_t key) {
    std::vector<float> values(key == 0 ? kElements : kElements / 2);
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] =
          0.01f * static_cast<float>((i * 7 + d * 13 + round * 29) % 23) -
          0.11f;
    }
    kernels::CodecOptions options;
    options.id = CodecId::kTernGrad;
    options.clip = 0.0f;
    kernels::EncodeContext context;
    context.stream = RandomStream{11, static_cast<uint32_t>(round), key, d};
    return *(*kernels::MakeCodec(options))->Encode(values, context);
  }

  std::string state_path_;
  uint64_t seed_;
  core::FakeClock clock_;
  std::unique_ptr<RoundAggregator> gs_;
};

// The answer, or a description of why there is none, for EXPECT_EQ.
std::string Bytes(const Outcome& outcome) {
  if (!outcome->has_value()) return "(no answer)";
  if (!(*outcome)->ok()) return (*outcome)->status().ToString();
  const RoundAnswer& answer = *outcome->value().value();
  std::string bytes = absl::StrCat("round ", answer.round, " lagging");
  for (const uint32_t d : answer.lagging) absl::StrAppend(&bytes, " ", d);
  for (const Contribution& c : answer.contributions) {
    absl::StrAppend(&bytes, " (", c.datacenter, ",", c.round, ")");
  }
  for (const ChunkPayload& chunk : answer.average) {
    absl::StrAppend(&bytes, " chunk ", chunk.chunk_key, ":", chunk.payload.data,
                    "/");
    for (const float s : chunk.payload.scalers) absl::StrAppend(&bytes, s);
  }
  return bytes;
}

TEST(RoundStateTest, ARetryAfterARestartGetsTheSameAnswer) {
  Gs undisturbed("");
  ASSERT_TRUE(undisturbed.Start().ok());
  undisturbed.RegisterAll();
  undisturbed.Send(0, 0);
  const Outcome reference = undisturbed.Send(1, 0);
  ASSERT_TRUE(reference->has_value());

  Gs gs(FreshTestDir() + "/global.state");
  ASSERT_TRUE(gs.Start().ok());
  gs.RegisterAll();
  gs.Send(0, 0);
  const Outcome before = gs.Send(1, 0);
  gs.Kill();  // before data center 0's answer reached it
  ASSERT_TRUE(gs.Start().ok());
  EXPECT_EQ(gs.aggregator().open_round(), 1u);
  const Outcome retried = gs.Send(0, 0);
  EXPECT_EQ(Bytes(retried), Bytes(reference));
  EXPECT_EQ(Bytes(before), Bytes(reference));
}

TEST(RoundStateTest, UpdatesWaitingWhenKilledAreSentAgainAndCountedOnce) {
  Gs undisturbed("");
  ASSERT_TRUE(undisturbed.Start().ok());
  undisturbed.RegisterAll();
  undisturbed.Send(0, 0);
  const Outcome reference = undisturbed.Send(1, 0);

  Gs gs(FreshTestDir() + "/global.state");
  ASSERT_TRUE(gs.Start().ok());
  gs.RegisterAll();
  gs.Send(0, 0);  // waits for data center 1; not in the state yet
  gs.Kill();
  ASSERT_TRUE(gs.Start().ok());
  // The registrations survived: no Register before the rounds.
  const Outcome again = gs.Send(0, 0);
  EXPECT_FALSE(again->has_value());
  const Outcome last = gs.Send(1, 0);
  EXPECT_EQ(Bytes(again), Bytes(reference));
  EXPECT_EQ(Bytes(last), Bytes(reference));
}

// Data center 1 lags: round 0 closes without it, it catches up late (its
// answer is the stored average, its updates join round 1, which data
// center 0 already sent). A restart after that late answer keeps both.
TEST(RoundStateTest, ALateAnswerKeepsTheUpdatesItTookAcrossARestart) {
  auto run = [](Gs& gs, bool restart) {
    EXPECT_TRUE(gs.Start().ok());
    gs.RegisterAll();
    gs.Send(0, 0);
    gs.PassTGlobal();  // round 0 closes; data center 1 lagging
    gs.Send(0, 1);
    const Outcome late = gs.Send(1, 0);
    EXPECT_TRUE(late->has_value());
    if (restart) {
      gs.Kill();
      EXPECT_TRUE(gs.Start().ok());
      gs.Send(0, 1);  // its retry: counted once, waits with the others
    }
    return gs.Send(1, 1);
  };
  Gs undisturbed("");
  const std::string reference = Bytes(run(undisturbed, false));
  EXPECT_THAT(reference, HasSubstr("(0,1) (1,0) (1,1)"));
  Gs gs(FreshTestDir() + "/global.state");
  EXPECT_EQ(Bytes(run(gs, true)), reference);
}

TEST(RoundStateTest, ARestartWithOtherFlagsIsRefused) {
  const std::string path = FreshTestDir() + "/global.state";
  {
    Gs gs(path);
    ASSERT_TRUE(gs.Start().ok());
    gs.RegisterAll();
  }
  Gs other_k(path);
  const absl::Status k = other_k.Start(3);
  EXPECT_TRUE(absl::IsFailedPrecondition(k)) << k;
  EXPECT_THAT(k.message(), HasSubstr("--num_datacenters=2, but this GS runs "
                                     "with --num_datacenters=3"));
  Gs other_seed(path, 6);
  const absl::Status seed = other_seed.Start();
  EXPECT_THAT(seed.message(), HasSubstr("--seed=5"));
}

TEST(RoundStateTest, ADamagedStateFileIsDataLoss) {
  const std::string path = FreshTestDir() + "/global.state";
  {
    Gs gs(path);
    ASSERT_TRUE(gs.Start().ok());
    gs.RegisterAll();
  }
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(20);
  file.put('\x7f');
  file.close();
  Gs gs(path);
  const absl::Status status = gs.Start();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(path));
}

}  // namespace
}  // namespace tern::global

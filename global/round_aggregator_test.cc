#include "global/round_aggregator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/captured_log.h"
#include "common/philox.h"
#include "core/barrier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"
#include "kernels/payload.h"

namespace tern::global {
namespace {

using kernels::CodecId;
using kernels::Layout;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kTGlobal = absl::Seconds(10);
constexpr absl::Duration kHoldTimeout = absl::Seconds(30);
constexpr uint64_t kSeed = 77;
constexpr uint64_t kSpecHash = 0xABCD;
constexpr uint64_t kChecksum = 0x1234;

// "Now" for the aggregator, moved by the test.
class FakeClock {
 public:
  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    now_ += by;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1'000'000);
};

// One SyncRound call's outcome. Shared with the callback, which may run
// after the test body (the aggregator's destructor answers pending calls).
class Pending {
 public:
  SyncCallback Callback(std::shared_ptr<Pending> self) {
    return [self](absl::StatusOr<RoundAnswerPtr> answer) {
      absl::MutexLock lock(&self->mu_);
      EXPECT_FALSE(self->answer_.has_value()) << "answered twice";
      self->answer_ = std::move(answer);
    };
  }
  bool done() const {
    absl::MutexLock lock(&mu_);
    return answer_.has_value();
  }
  // Waits (really) up to `timeout` for the answer.
  absl::StatusOr<RoundAnswerPtr> Wait(
      absl::Duration timeout = absl::Seconds(20)) const {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return answer_.has_value();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
      return absl::DeadlineExceededError("the test's wait timed out");
    }
    return *answer_;
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<absl::StatusOr<RoundAnswerPtr>> answer_ ABSL_GUARDED_BY(mu_);
};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::unique_ptr<RoundAggregator> gs;

  explicit Fixture(uint32_t k, uint32_t max_lag = 2,
                   Logger logger = MakeNullLogger()) {
    RoundAggregatorOptions options;
    options.num_datacenters = k;
    options.seed = kSeed;
    options.t_global = kTGlobal;
    options.max_lag = max_lag;
    options.hold_timeout = kHoldTimeout;
    options.clock = [clock = clock] { return clock->Now(); };
    absl::StatusOr<std::unique_ptr<RoundAggregator>> created =
        RoundAggregator::Create(options, std::move(logger));
    EXPECT_TRUE(created.ok()) << created.status();
    gs = *std::move(created);
  }

  // Sends and returns the call's outcome, answered or not.
  std::shared_ptr<Pending> Send(const SyncRequest& request) {
    auto pending = std::make_shared<Pending>();
    gs->SyncRound(request, pending->Callback(pending));
    return pending;
  }

  void Tick() { gs->Tick(clock->Now()); }
};

RegisterRequest Registration(uint32_t d, uint32_t k,
                             std::vector<uint64_t> elements,
                             CodecId codec = CodecId::kFp32,
                             Layout layout = Layout::kRaw) {
  RegisterRequest request;
  request.datacenter = d;
  request.num_datacenters = k;
  request.param_spec_hash = kSpecHash;
  request.param_checksum = kChecksum;
  request.chunk_elements = std::move(elements);
  request.update_codec = codec;
  request.update_layout = layout;
  return request;
}

void RegisterAll(RoundAggregator* gs, uint32_t k,
                 const std::vector<uint64_t>& elements,
                 CodecId codec = CodecId::kFp32, Layout layout = Layout::kRaw) {
  for (uint32_t d = 0; d < k; ++d) {
    absl::StatusOr<RegisterReply> reply =
        gs->Register(Registration(d, k, elements, codec, layout));
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->next_round, 0u);
  }
}

std::unique_ptr<kernels::Codec> Codec(CodecId id,
                                      Layout layout = Layout::kUnspecified) {
  kernels::CodecOptions options;
  options.id = id;
  options.clip = 0.0f;
  options.push_layout = layout;
  return *kernels::MakeCodec(options);
}

// Deterministic test values with a wide dynamic range, so that summing in
// another order would change the bits.
std::vector<float> Values(uint64_t n, uint32_t salt) {
  std::vector<float> values(n);
  const RandomStream stream{salt, 0, 0, 0};
  for (uint64_t i = 0; i < n; ++i) {
    const PhiloxCounter words = RandomWords(stream, static_cast<uint32_t>(i));
    const float unit = UniformFloat(words.v[0]) - 0.5f;
    const float scale = (words.v[1] % 4 == 0) ? 1e6f : 1.0f;
    values[i] = unit * scale;
  }
  return values;
}

ChunkPayload Fp32Update(uint32_t key, const std::vector<float>& values) {
  return ChunkPayload{key, *Codec(CodecId::kFp32)->Encode(values, {})};
}

SyncRequest Request(uint32_t d, uint64_t round,
                    std::vector<ChunkPayload> updates = {}) {
  return SyncRequest{d, round, std::move(updates)};
}

std::vector<float> DecodeFp32(const kernels::Payload& payload) {
  std::vector<float> out(payload.num_elements);
  const absl::Status status =
      Codec(CodecId::kFp32)->Decode(payload, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

std::vector<uint32_t> Keys(const RoundAnswer& answer) {
  std::vector<uint32_t> keys;
  for (const ChunkPayload& chunk : answer.average)
    keys.push_back(chunk.chunk_key);
  return keys;
}

// Bitwise float comparison (NaN-safe, -0 != +0).
void ExpectSameBits(const std::vector<float>& actual,
                    const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t j = 0; j < actual.size(); ++j) {
    uint32_t a, e;
    std::memcpy(&a, &actual[j], 4);
    std::memcpy(&e, &expected[j], 4);
    ASSERT_EQ(a, e) << "element " << j << ": " << actual[j] << " vs "
                    << expected[j];
  }
}

// --- averaging ---

class AverageTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(AverageTest, MissingChunksCountAsZeroAndTheSumIsInDataCenterOrder) {
  const uint64_t n = GetParam();
  constexpr uint32_t kK = 3;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {n, n, 5});
  const std::vector<float> u00 = Values(n, 1), u01 = Values(n, 2),
                           u11 = Values(n, 3);
  // Arrival order 2, 1, 0: the sum is still taken as d0 + d1 (+ d2).
  auto p2 = f.Send(Request(2, 0));  // a heartbeat: no chunk
  auto p1 = f.Send(Request(1, 0, {Fp32Update(1, u11)}));
  EXPECT_FALSE(p1->done());
  auto p0 = f.Send(Request(0, 0, {Fp32Update(0, u00), Fp32Update(1, u01)}));
  for (const auto& p : {p0, p1, p2}) ASSERT_TRUE(p->done());
  absl::StatusOr<RoundAnswerPtr> answer = p0->Wait();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(*p1->Wait(), *answer) << "every data center gets the same answer";
  EXPECT_EQ(*p2->Wait(), *answer);
  const RoundAnswer& a = **answer;
  EXPECT_EQ(a.round, 0u);
  EXPECT_THAT(a.lagging, IsEmpty());
  EXPECT_THAT(Keys(a), ElementsAre(0u, 1u)) << "chunk 2 was sent by nobody";
  std::vector<float> a0(n), a1(n);
  for (uint64_t j = 0; j < n; ++j) {
    a0[j] = u00[j] / 3.0f;
    a1[j] = (u01[j] + u11[j]) / 3.0f;
  }
  ExpectSameBits(DecodeFp32(a.average[0].payload), a0);
  ExpectSameBits(DecodeFp32(a.average[1].payload), a1);
  EXPECT_THAT(
      a.contributions,
      ElementsAre(Contribution{0, 0}, Contribution{1, 0}, Contribution{2, 0}));
  EXPECT_EQ(f.gs->open_round(), 1u);
  EXPECT_EQ(f.gs->stats().rounds_closed, 1u);
  EXPECT_EQ(f.gs->stats().bytes_in, 3 * n * sizeof(float));
}

INSTANTIATE_TEST_SUITE_P(Sizes, AverageTest,
                         ::testing::Values(0, 1, 31, 32, 33, 4097,
                                           (1u << 20) + 3));

TEST(RoundAggregatorTest, OneDataCenterClosesEachRoundAtOnce) {
  Fixture f(1);
  RegisterAll(f.gs.get(), 1, {4});
  for (uint64_t r = 0; r < 5; ++r) {
    const std::vector<float> u = {1, -2, 3, static_cast<float>(r)};
    auto p = f.Send(Request(0, r, {Fp32Update(0, u)}));
    ASSERT_TRUE(p->done());
    ExpectSameBits(DecodeFp32((*p->Wait())->average[0].payload), u);
  }
  EXPECT_EQ(f.gs->open_round(), 5u);
}

// --- reproducible bytes ---

// The answer of one round of `k` data centers sending TernGrad updates,
// in the order `order`, with one thread per data center when `threads`.
RoundAnswerPtr RunTernRound(const std::vector<uint32_t>& order, bool threads) {
  const uint32_t k = static_cast<uint32_t>(order.size());
  const std::vector<uint64_t> elements = {1000, 33, 1};
  Fixture f(k);
  RegisterAll(f.gs.get(), k, elements, CodecId::kTernGrad,
              Layout::kTernaryBase3);
  const auto codec = Codec(CodecId::kTernGrad, Layout::kTernaryBase3);
  std::vector<SyncRequest> requests;
  for (uint32_t d = 0; d < k; ++d) {
    SyncRequest request = Request(d, 0);
    for (uint32_t key = 0; key < elements.size(); ++key) {
      if ((d + key) % 3 == 2) continue;  // some chunks not sent
      kernels::EncodeContext context;
      context.stream = RandomStream{kSeed, 0, key, d};
      request.updates.push_back(ChunkPayload{
          key, *codec->Encode(Values(elements[key], 10 * d + key), context)});
    }
    requests.push_back(std::move(request));
  }
  std::vector<std::shared_ptr<Pending>> pending(k);
  if (threads) {
    std::vector<std::thread> senders;
    for (const uint32_t d : order) {
      senders.emplace_back([&, d] { pending[d] = f.Send(requests[d]); });
    }
    for (std::thread& sender : senders) sender.join();
  } else {
    for (const uint32_t d : order) pending[d] = f.Send(requests[d]);
  }
  absl::StatusOr<RoundAnswerPtr> answer = pending[0]->Wait();
  EXPECT_TRUE(answer.ok()) << answer.status();
  return answer.ok() ? *answer : nullptr;
}

TEST(RoundAggregatorTest, AnswerBytesDoNotDependOnArrivalOrder) {
  const RoundAnswerPtr reference = RunTernRound({0, 1, 2, 3}, false);
  ASSERT_NE(reference, nullptr);
  ASSERT_EQ(reference->average.size(), 3u);
  std::vector<uint32_t> order = {0, 1, 2, 3};
  int runs = 0;
  do {
    const RoundAnswerPtr other = RunTernRound(order, runs % 2 == 1);
    ASSERT_NE(other, nullptr);
    ASSERT_EQ(other->average.size(), reference->average.size());
    for (size_t i = 0; i < reference->average.size(); ++i) {
      const kernels::Payload& a = reference->average[i].payload;
      const kernels::Payload& b = other->average[i].payload;
      EXPECT_EQ(a.data, b.data) << "chunk " << i;
      EXPECT_EQ(a.scalers, b.scalers) << "chunk " << i;
    }
    ++runs;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(runs, 24);
}

TEST(RoundAggregatorTest, Fp32SumIsInDataCenterOrderWhateverTheArrivalOrder) {
  constexpr uint32_t kK = 4;
  constexpr uint64_t kN = 4097;
  std::vector<std::vector<float>> u;
  for (uint32_t d = 0; d < kK; ++d) u.push_back(Values(kN, 20 + d));
  std::vector<float> expected(kN), reversed(kN);
  size_t differ = 0;
  for (uint64_t j = 0; j < kN; ++j) {
    expected[j] = (((u[0][j] + u[1][j]) + u[2][j]) + u[3][j]) / 4.0f;
    reversed[j] = (((u[3][j] + u[2][j]) + u[1][j]) + u[0][j]) / 4.0f;
    if (expected[j] != reversed[j]) ++differ;
  }
  ASSERT_GT(differ, 0u) << "the data must make the order visible";
  std::vector<uint32_t> order = {0, 1, 2, 3};
  do {
    Fixture f(kK);
    RegisterAll(f.gs.get(), kK, {kN});
    std::vector<std::shared_ptr<Pending>> pending;
    for (const uint32_t d : order) {
      pending.push_back(f.Send(Request(d, 0, {Fp32Update(0, u[d])})));
    }
    const absl::StatusOr<RoundAnswerPtr> answer = pending[0]->Wait();
    ASSERT_TRUE(answer.ok()) << answer.status();
    ExpectSameBits(DecodeFp32((*answer)->average[0].payload), expected);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(RoundAggregatorTest, TernGradAnswerIsTheCodecsEncodeOfTheAverage) {
  constexpr uint32_t kK = 2;
  constexpr uint64_t kN = 4099;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {kN}, CodecId::kTernGrad, Layout::kTernary2Bit);
  const auto codec = Codec(CodecId::kTernGrad, Layout::kTernary2Bit);
  std::vector<std::vector<float>> decoded(kK, std::vector<float>(kN));
  std::vector<std::shared_ptr<Pending>> pending;
  for (uint32_t d = 0; d < kK; ++d) {
    kernels::EncodeContext context;
    context.stream = RandomStream{kSeed, 0, 0, d};
    kernels::Payload update = *codec->Encode(Values(kN, d + 5), context);
    ASSERT_TRUE(codec->Decode(update, absl::MakeSpan(decoded[d])).ok());
    pending.push_back(f.Send(Request(d, 0, {ChunkPayload{0, update}})));
  }
  const RoundAnswerPtr answer = *pending[0]->Wait();
  std::vector<float> average(kN);
  for (uint64_t j = 0; j < kN; ++j) {
    average[j] = (decoded[0][j] + decoded[1][j]) / 2.0f;
  }
  // The GS's own scaler (0: local, clip 0 = max|A|) and its own stream.
  kernels::EncodeContext context;
  context.stream = RandomStream{kSeed, 0, 0, kGlobalStreamWorker};
  const kernels::Payload expected = *codec->Encode(average, context);
  const kernels::Payload& got = answer->average[0].payload;
  EXPECT_EQ(got.codec, CodecId::kTernGrad);
  EXPECT_EQ(got.layout, Layout::kTernary2Bit);
  EXPECT_EQ(got.data, expected.data);
  EXPECT_EQ(got.scalers, expected.scalers);
  float max_abs = 0;
  for (const float v : average) max_abs = std::max(max_abs, std::abs(v));
  ASSERT_EQ(got.scalers.size(), 1u);
  EXPECT_EQ(got.scalers[0], max_abs) << "no clipping of the average";
}

// --- T_global, lag, late submissions ---

TEST(RoundAggregatorTest, TGlobalExpiryClosesTheRoundAndMarksLagging) {
  constexpr uint32_t kK = 3;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {2});
  auto p0 = f.Send(Request(0, 0, {Fp32Update(0, {3, 6})}));
  f.clock->Advance(absl::Seconds(4));
  auto p1 = f.Send(Request(1, 0, {Fp32Update(0, {3, 0})}));
  // T_global counts from the round's first arrival, not the last.
  f.clock->Advance(kTGlobal - absl::Seconds(4) - absl::Milliseconds(1));
  f.Tick();
  EXPECT_FALSE(p0->done());
  EXPECT_FALSE(p1->done());
  f.clock->Advance(absl::Milliseconds(1));
  f.Tick();
  ASSERT_TRUE(p0->done());
  const RoundAnswerPtr answer = *p0->Wait();
  EXPECT_THAT(answer->lagging, ElementsAre(2u));
  ExpectSameBits(DecodeFp32(answer->average[0].payload), {2, 2});  // /3
  EXPECT_EQ(*p1->Wait(), answer);
  EXPECT_EQ(f.gs->open_round(), 1u);
}

TEST(RoundAggregatorTest, LateUpdatesGetTheStoredAnswerAndJoinTheOpenRound) {
  constexpr uint32_t kK = 3;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {2, 1});
  auto p00 = f.Send(Request(0, 0, {Fp32Update(0, {3, 3})}));
  auto p10 = f.Send(Request(1, 0, {Fp32Update(0, {6, 6})}));
  f.clock->Advance(kTGlobal);
  f.Tick();
  const RoundAnswerPtr a0 = *p00->Wait();
  EXPECT_THAT(a0->lagging, ElementsAre(2u));

  auto p01 = f.Send(Request(0, 1, {Fp32Update(0, {30, 0})}));
  auto p11 = f.Send(Request(1, 1));
  // Data center 2 catches up: round 0 is answered at once, the same bytes.
  auto p20 =
      f.Send(Request(2, 0, {Fp32Update(0, {9, 0}), Fp32Update(1, {12})}));
  ASSERT_TRUE(p20->done());
  EXPECT_EQ(*p20->Wait(), a0);
  EXPECT_FALSE(p01->done()) << "round 1 still waits for data center 2";
  auto p21 = f.Send(Request(2, 1, {Fp32Update(0, {0, 3})}));
  ASSERT_TRUE(p01->done());
  const RoundAnswerPtr a1 = *p21->Wait();
  EXPECT_EQ(a1->round, 1u);
  EXPECT_THAT(a1->lagging, IsEmpty());
  // Round 1 = (d0's round 1 + d2's rounds 0 and 1) / 3.
  ExpectSameBits(DecodeFp32(a1->average[0].payload), {13, 1});
  ExpectSameBits(DecodeFp32(a1->average[1].payload), {4});
  EXPECT_THAT(a1->contributions,
              ElementsAre(Contribution{0, 1}, Contribution{1, 1},
                          Contribution{2, 0}, Contribution{2, 1}));
  EXPECT_EQ(f.gs->stats().late_submissions, 1u);
}

TEST(RoundAggregatorTest, ADuplicateIsCountedOnceAndAnsweredAlike) {
  constexpr uint32_t kK = 2;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {2});
  auto first = f.Send(Request(0, 0, {Fp32Update(0, {4, 8})}));
  // A retry with other values: the first copy stays.
  auto retry = f.Send(Request(0, 0, {Fp32Update(0, {100, 100})}));
  EXPECT_FALSE(retry->done());
  auto other = f.Send(Request(1, 0, {Fp32Update(0, {2, 2})}));
  const RoundAnswerPtr answer = *other->Wait();
  EXPECT_EQ(*first->Wait(), answer);
  EXPECT_EQ(*retry->Wait(), answer);
  ExpectSameBits(DecodeFp32(answer->average[0].payload), {3, 5});
  EXPECT_THAT(answer->contributions,
              ElementsAre(Contribution{0, 0}, Contribution{1, 0}));
  // A retry after the round closed gets the stored answer.
  auto late_retry = f.Send(Request(1, 0, {Fp32Update(0, {7, 7})}));
  ASSERT_TRUE(late_retry->done());
  EXPECT_EQ(*late_retry->Wait(), answer);
  EXPECT_EQ(f.gs->stats().duplicates, 2u);
  EXPECT_EQ(f.gs->open_round(), 1u);
}

TEST(RoundAggregatorTest, DuplicatesBeyondTheCapAreRefusedAtOnce) {
  constexpr uint32_t kK = 2;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {2});
  // The first request and its copies wait, up to the cap.
  std::vector<std::shared_ptr<Pending>> held;
  for (size_t i = 0; i < core::kMaxWaitsPerMember; ++i) {
    held.push_back(f.Send(Request(0, 0, {Fp32Update(0, {4, 8})})));
    EXPECT_FALSE(held.back()->done());
  }
  auto beyond = f.Send(Request(0, 0, {Fp32Update(0, {4, 8})}));
  ASSERT_TRUE(beyond->done()) << "answered at once";
  const absl::Status refused = beyond->Wait().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "data center 0 already has 5 calls waiting for round 0; this one "
            "is refused (retries never need more at once)");
  auto other = f.Send(Request(1, 0, {Fp32Update(0, {2, 2})}));
  const RoundAnswerPtr answer = *other->Wait();
  for (const auto& call : held) EXPECT_EQ(*call->Wait(), answer);
  ExpectSameBits(DecodeFp32(answer->average[0].payload), {3, 5});
}

TEST(RoundAggregatorTest, AThousandRefusedRequestsLogABoundedNumberOfLines) {
  CapturedLog log;
  Fixture f(2, 2, log.logger());
  RegisterAll(f.gs.get(), 2, {2});
  for (int i = 0; i < 1000; ++i) {
    auto future = f.Send(Request(1, 7, {Fp32Update(0, {1, 1})}));
    EXPECT_EQ(future->Wait().status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  auto warnings = [&] { return log.Lines(spdlog::level::warn); };
  ASSERT_EQ(warnings().size(), 5u);
  EXPECT_EQ(warnings()[0],
            "round 7 of data center 1 refused: round 7 of data center 1 is in "
            "the future: the GS is at round 0");
  f.clock->Advance(absl::Seconds(60));
  f.Tick();
  ASSERT_EQ(warnings().size(), 6u);
  EXPECT_EQ(warnings().back(),
            "995 more refusals of round FAILED_PRECONDITION from data center 1 "
            "in the last 60 s were not logged");
}

// max_lag = 1: data center 1 registers and stays silent.
class HoldTest : public ::testing::Test {
 protected:
  HoldTest() : f_(2, /*max_lag=*/1) { RegisterAll(f_.gs.get(), 2, {1}); }

  // Data center 0 sends round r and T_global passes.
  std::shared_ptr<Pending> LeadRound(uint64_t r, float value) {
    auto pending = f_.Send(Request(0, r, {Fp32Update(0, {value})}));
    f_.clock->Advance(kTGlobal);
    f_.Tick();
    return pending;
  }

  Fixture f_;
};

TEST_F(HoldTest, HoldsWhileADataCenterLagsMoreThanMaxLagAndReleasesOnCatchUp) {
  auto r0 = LeadRound(0, 2);
  ASSERT_TRUE(r0->done()) << "lag 0 after round 0 closes";
  auto r1 = LeadRound(1, 4);
  ASSERT_TRUE(r1->done()) << "data center 1 lags 1 round: allowed";
  EXPECT_THAT((*r1->Wait())->lagging, ElementsAre(1u));
  auto r2 = LeadRound(2, 6);
  EXPECT_FALSE(r2->done()) << "data center 1 lags 2 > max_lag rounds: held";
  EXPECT_TRUE(f_.gs->holding());
  EXPECT_EQ(f_.gs->stats().holds, 1u);
  f_.clock->Advance(absl::Seconds(5));
  f_.Tick();
  EXPECT_FALSE(r2->done());

  // Data center 1 sends round 0 late: answered at once; now it lags 1
  // round, the hold ends and round 2 closes with its round-0 update.
  auto late = f_.Send(Request(1, 0, {Fp32Update(0, {10})}));
  ASSERT_TRUE(late->done());
  EXPECT_EQ(*late->Wait(), *r0->Wait());
  ASSERT_TRUE(r2->done());
  const RoundAnswerPtr a2 = *r2->Wait();
  EXPECT_FALSE(f_.gs->holding());
  EXPECT_EQ(a2->round, 2u);
  EXPECT_THAT(a2->lagging, ElementsAre(1u));
  ExpectSameBits(DecodeFp32(a2->average[0].payload), {8});  // (6 + 10) / 2
  EXPECT_THAT(a2->contributions,
              ElementsAre(Contribution{0, 2}, Contribution{1, 0}));

  // The last 2 x (max_lag + 1) = 4 answers are kept (rounds 0 to 2 so
  // far).
  auto l1 = f_.Send(Request(1, 1));
  ASSERT_TRUE(l1->done());
  EXPECT_EQ(*l1->Wait(), *r1->Wait());
  auto again0 = f_.Send(Request(1, 0));  // a retry of a counted round
  ASSERT_TRUE(again0->done());
  EXPECT_EQ(*again0->Wait(), *r0->Wait());
  auto l2 = f_.Send(Request(1, 2));
  EXPECT_EQ(*l2->Wait(), a2);
  // Caught up: round 3 closes once both send it.
  auto both0 = f_.Send(Request(0, 3));
  auto both1 = f_.Send(Request(1, 3));
  ASSERT_TRUE(both0->done());
  EXPECT_THAT((*both1->Wait())->lagging, IsEmpty());
  // Round 4 closes: round 0's answer is the fifth and is dropped.
  f_.Send(Request(0, 4));
  ASSERT_TRUE(f_.Send(Request(1, 4))->done());
  auto old = f_.Send(Request(1, 0));
  ASSERT_TRUE(old->done());
  EXPECT_EQ(old->Wait().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(old->Wait().status().message(),
              AllOf(HasSubstr("round 0"), HasSubstr("no longer kept"),
                    HasSubstr("the last 4 rounds")));
}

TEST_F(HoldTest, AHoldOutlastingItsTimeoutAnswersUnavailableNamingTheLaggard) {
  LeadRound(0, 1);
  LeadRound(1, 1);
  auto held = LeadRound(2, 1);
  ASSERT_TRUE(f_.gs->holding());
  f_.clock->Advance(kHoldTimeout - absl::Milliseconds(1));
  f_.Tick();
  EXPECT_FALSE(held->done());
  f_.clock->Advance(absl::Milliseconds(1));
  f_.Tick();
  ASSERT_TRUE(held->done());
  const absl::Status status = held->Wait().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("round 2 is held"), HasSubstr("data center 1"),
                    HasSubstr("at round 0"), HasSubstr("--max_lag=1")));
  EXPECT_EQ(f_.gs->stats().hold_timeouts, 1u);
  EXPECT_TRUE(f_.gs->holding()) << "the round stays held";

  // The LPS retries: held again (for at most another hold_timeout), and
  // answered once data center 1 catches up.
  auto retry = f_.Send(Request(0, 2, {Fp32Update(0, {50})}));
  f_.clock->Advance(kHoldTimeout - absl::Milliseconds(1));
  f_.Tick();
  EXPECT_FALSE(retry->done()) << "its own hold began when it arrived";
  f_.Send(Request(1, 0));
  ASSERT_TRUE(retry->done());
  const absl::StatusOr<RoundAnswerPtr> answer = retry->Wait();
  ASSERT_TRUE(answer.ok()) << answer.status();
  // The first copy (1) counts, not the retry's (50): (1 + 0) / 2.
  ExpectSameBits(DecodeFp32((*answer)->average[0].payload), {0.5f});
}

// The one expiry rule (core/barrier.h) under a hold: a call waits
// hold_timeout from the later of its arrival and the hold's start, and
// expires exactly at that deadline.
TEST_F(HoldTest, ACallArrivingDuringAHoldExpiresExactlyAtItsOwnDeadline) {
  LeadRound(0, 1);
  LeadRound(1, 1);
  auto held = LeadRound(2, 1);  // the hold begins now: H
  ASSERT_TRUE(f_.gs->holding());
  f_.clock->Advance(absl::Seconds(1));
  auto retry = f_.Send(Request(0, 2));  // a retry at H + 1s
  f_.clock->Advance(kHoldTimeout - absl::Seconds(1));  // H + hold_timeout
  f_.Tick();
  ASSERT_TRUE(held->done()) << "expired exactly at its deadline";
  EXPECT_FALSE(retry->done());
  f_.clock->Advance(absl::Seconds(1) - absl::Nanoseconds(1));
  f_.Tick();
  EXPECT_FALSE(retry->done()) << "one nanosecond before its own deadline";
  f_.clock->Advance(absl::Nanoseconds(1));
  f_.Tick();
  ASSERT_TRUE(retry->done());
  EXPECT_EQ(retry->Wait().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f_.gs->stats().hold_timeouts, 2u);
}

TEST(RoundAggregatorTest, ADataCenterThatNeverRegisteredIsLaggingToo) {
  Fixture f(2, /*max_lag=*/0);
  ASSERT_TRUE(f.gs->Register(Registration(0, 2, {1})).ok());
  auto p = f.Send(Request(0, 0));
  f.clock->Advance(kTGlobal);
  f.Tick();
  ASSERT_TRUE(p->done()) << "lag 0 is within max_lag 0";
  EXPECT_THAT((*p->Wait())->lagging, ElementsAre(1u));
  auto held = f.Send(Request(0, 1));
  f.clock->Advance(kTGlobal + kHoldTimeout);
  f.Tick();  // starts the hold
  EXPECT_FALSE(held->done());
  f.clock->Advance(kHoldTimeout);
  f.Tick();
  EXPECT_THAT(held->Wait().status().message(), HasSubstr("not registered"));
}

// --- K data centers as threads ---

TEST(RoundAggregatorTest, DataCentersAsThreadsAgreeOnEveryRound) {
  constexpr uint32_t kK = 4;
  constexpr uint64_t kRounds = 6;
  constexpr uint64_t kN = 257;
  RoundAggregatorOptions options;
  options.num_datacenters = kK;
  options.t_global = absl::Seconds(30);  // real time: never reached
  auto created = RoundAggregator::Create(options, MakeNullLogger());
  ASSERT_TRUE(created.ok());
  RoundAggregator& gs = **created;
  RegisterAll(&gs, kK, {kN, 3});
  std::vector<std::vector<RoundAnswerPtr>> seen(kK);
  std::vector<std::thread> lpss;
  for (uint32_t d = 0; d < kK; ++d) {
    lpss.emplace_back([&, d] {
      for (uint64_t r = 0; r < kRounds; ++r) {
        auto pending = std::make_shared<Pending>();
        gs.SyncRound(Request(d, r, {Fp32Update(0, Values(kN, 100 * d + r))}),
                     pending->Callback(pending));
        absl::StatusOr<RoundAnswerPtr> answer = pending->Wait();
        ASSERT_TRUE(answer.ok()) << answer.status();
        seen[d].push_back(*answer);
      }
    });
  }
  for (std::thread& lps : lpss) lps.join();
  for (uint64_t r = 0; r < kRounds; ++r) {
    std::vector<float> expected = Values(kN, r);
    for (uint32_t d = 1; d < kK; ++d) {
      const std::vector<float> u = Values(kN, 100 * d + r);
      for (uint64_t j = 0; j < kN; ++j) expected[j] += u[j];
    }
    for (float& v : expected) v /= static_cast<float>(kK);
    ASSERT_EQ(seen[0].size(), kRounds);
    ExpectSameBits(DecodeFp32(seen[0][r]->average[0].payload), expected);
    for (uint32_t d = 1; d < kK; ++d) EXPECT_EQ(seen[d][r], seen[0][r]);
  }
  EXPECT_EQ(gs.open_round(), kRounds);
}

// --- validation ---

struct BadUpdate {
  std::string name;
  std::function<void(SyncRequest*)> spoil;
  std::string message;  // part of the expected message
};

class ValidationTest : public ::testing::TestWithParam<BadUpdate> {};

TEST_P(ValidationTest, RefusesNamingDataCenterRoundAndChunkAndAddsNothing) {
  constexpr uint32_t kK = 2;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {8, 4, 4}, CodecId::kTernGrad,
              Layout::kTernary2Bit);
  const auto codec = Codec(CodecId::kTernGrad, Layout::kTernary2Bit);
  auto encode = [&](uint32_t key, uint64_t n, uint32_t salt) {
    kernels::EncodeContext context;
    context.stream = RandomStream{kSeed, 0, key, salt};
    return ChunkPayload{key, *codec->Encode(Values(n, salt), context)};
  };
  SyncRequest good = Request(1, 0, {encode(0, 8, 1), encode(1, 4, 2)});
  SyncRequest bad = good;
  GetParam().spoil(&bad);

  auto refused = f.Send(bad);
  ASSERT_TRUE(refused->done());
  const absl::Status status = refused->Wait().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("round 0"), HasSubstr("data center 1"),
                    HasSubstr(GetParam().message)));
  EXPECT_EQ(f.gs->stats().refused, 1u);
  EXPECT_EQ(f.gs->stats().bytes_in, 0u);

  // The GS keeps serving; the round counts only the valid request.
  auto p0 = f.Send(Request(0, 0));
  auto p1 = f.Send(good);
  const absl::StatusOr<RoundAnswerPtr> answer = p0->Wait();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_THAT((*answer)->contributions,
              ElementsAre(Contribution{0, 0}, Contribution{1, 0}));
  EXPECT_THAT(Keys(**answer), ElementsAre(0u, 1u));
}

INSTANTIATE_TEST_SUITE_P(
    Updates, ValidationTest,
    ::testing::Values(
        BadUpdate{"UnknownChunk",
                  [](SyncRequest* r) { r->updates[1].chunk_key = 3; },
                  "chunk 3 of data center 1 is not a chunk of the model"},
        BadUpdate{"RepeatedChunk",
                  [](SyncRequest* r) { r->updates[1].chunk_key = 0; },
                  "chunk 0 of data center 1 appears twice"},
        BadUpdate{"ElementCount",
                  [](SyncRequest* r) {
                    r->updates[1] = r->updates[0];  // 8 elements
                    r->updates[1].chunk_key = 1;
                  },
                  "chunk 1 of data center 1: 8 elements, but the chunk has 4"},
        // (fp32 RAW is taken for any chunk: an LPS's final
        // synchronization; another codec is not.)
        BadUpdate{"Codec",
                  [](SyncRequest* r) {
                    r->updates[1] = ChunkPayload{
                        1, *Codec(CodecId::kFp16, Layout::kRaw)
                                ->Encode(std::vector<float>{1, 2, 3, 4},
                                         kernels::EncodeContext())};
                  },
                  "chunk 1 of data center 1: codec fp16"},
        BadUpdate{"Layout",
                  [](SyncRequest* r) {
                    r->updates[0].payload.layout = Layout::kTernaryBase3;
                  },
                  "chunk 0 of data center 1: layout TERNARY_BASE3"},
        BadUpdate{
            "FormatVersion",
            [](SyncRequest* r) { r->updates[0].payload.format_version = 2; },
            "chunk 0 of data center 1: format version 2"},
        BadUpdate{
            "Summands",
            [](SyncRequest* r) { r->updates[1].payload.num_summands = 2; },
            "chunk 1 of data center 1: num_summands 2, but an update holds "
            "one data center's values"},
        BadUpdate{
            "CorruptCode",
            [](SyncRequest* r) { r->updates[0].payload.data[0] = '\xff'; },
            "chunk 0 of data center 1"},
        BadUpdate{"TruncatedData",
                  [](SyncRequest* r) { r->updates[0].payload.data.pop_back(); },
                  "chunk 0 of data center 1"},
        BadUpdate{"NanScaler",
                  [](SyncRequest* r) {
                    r->updates[1].payload.scalers[0] =
                        std::numeric_limits<float>::quiet_NaN();
                  },
                  "chunk 1 of data center 1: scaler nan"},
        BadUpdate{"InfScaler",
                  [](SyncRequest* r) {
                    r->updates[1].payload.scalers[0] =
                        std::numeric_limits<float>::infinity();
                  },
                  "chunk 1 of data center 1: scaler inf"},
        // Finite, but beyond the magnitude rule (issue 14).
        BadUpdate{"HugeScaler",
                  [](SyncRequest* r) {
                    r->updates[1].payload.scalers[0] = 3.4e38f;
                  },
                  "chunk 1 of data center 1: scaler is 3.4e+38, beyond 1e+30"},
        BadUpdate{"MissingScaler",
                  [](SyncRequest* r) { r->updates[1].payload.scalers.clear(); },
                  "chunk 1 of data center 1"}),
    [](const ::testing::TestParamInfo<BadUpdate>& info) {
      return info.param.name;
    });

TEST(RoundAggregatorTest, RefusesNanInFp32UpdatesAndNamesTheElement) {
  Fixture f(2);
  RegisterAll(f.gs.get(), 2, {3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const float bad : {nan, std::numeric_limits<float>::infinity()}) {
    auto p = f.Send(Request(0, 0, {Fp32Update(0, {1, bad, 2})}));
    const absl::Status status = p->Wait().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(),
                AllOf(HasSubstr("round 0: chunk 0 of data center 0"),
                      HasSubstr("element 1 is")));
  }
  EXPECT_EQ(f.gs->stats().bytes_in, 0u);
}

TEST(RoundAggregatorTest, RefusesRoundsOutOfPlace) {
  Fixture f(2);
  RegisterAll(f.gs.get(), 2, {1});
  auto code = [&](const SyncRequest& request) {
    auto pending = f.Send(request);
    EXPECT_TRUE(pending->done());
    return pending->Wait().status();
  };
  absl::Status status = code(Request(0, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("round 1 of data center 0 is in the "
                                          "future: the GS is at round 0"));
  status = code(Request(5, 0));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("unknown data center 5"));

  Fixture unregistered(2);
  ASSERT_TRUE(unregistered.gs->Register(Registration(0, 2, {1})).ok());
  auto p = unregistered.Send(Request(1, 0));
  EXPECT_EQ(p->Wait().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(p->Wait().status().message(), HasSubstr("has not registered"));

  // Rounds in order: data center 1, lagging at round 0, cannot skip to 1.
  f.Send(Request(0, 0));
  f.clock->Advance(kTGlobal);
  f.Tick();
  ASSERT_EQ(f.gs->open_round(), 1u);
  status = code(Request(1, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("sent round 1, but its next round is 0"));
}

// Issue 14: a finite update too large for any sane run. Before the
// magnitude rule (core::kMaxMagnitude), data center 1's two rounds of 3e38,
// both joined to round 1, summed to inf, and round 1 failed the run:
// INTERNAL for every data center. Now the first of them is refused on
// arrival, naming the data center, the chunk and the rule, and the others'
// rounds complete.
TEST(RoundAggregatorTest, AnUpdateBeyondTheMagnitudeRuleRefusesOnlyItsSender) {
  constexpr uint32_t kK = 3;
  Fixture f(kK);
  RegisterAll(f.gs.get(), kK, {2});
  auto p00 = f.Send(Request(0, 0, {Fp32Update(0, {3, 3})}));
  auto p20 = f.Send(Request(2, 0, {Fp32Update(0, {6, 0})}));
  f.clock->Advance(kTGlobal);
  f.Tick();
  ASSERT_TRUE(p00->Wait().ok()) << p00->Wait().status();

  // Data center 1 lags, then sends rounds 0 (late) and 1, each finite.
  auto p10 = f.Send(Request(1, 0, {Fp32Update(0, {3e38f, 1})}));
  ASSERT_TRUE(p10->done());
  const absl::Status refused = p10->Wait().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(),
              AllOf(HasSubstr("round 0: chunk 0 of data center 1"),
                    HasSubstr("element 0 is 3e+38"), HasSubstr("1e+30")));
  EXPECT_EQ(f.Send(Request(1, 1, {Fp32Update(0, {3e38f, 1})}))
                ->Wait()
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition)  // round 0 comes first
      << "nothing of the refused round counted";

  auto p01 = f.Send(Request(0, 1, {Fp32Update(0, {3, 0})}));
  auto p21 = f.Send(Request(2, 1, {Fp32Update(0, {0, 6})}));
  f.clock->Advance(kTGlobal);
  f.Tick();
  for (const auto& p : {p01, p21}) {
    const absl::StatusOr<RoundAnswerPtr> answer = p->Wait();
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_THAT((*answer)->lagging, ElementsAre(1u));
    ExpectSameBits(DecodeFp32((*answer)->average[0].payload), {1, 2});
  }
  EXPECT_TRUE(f.gs->run_status().ok()) << f.gs->run_status();
  EXPECT_EQ(f.gs->stats().refused, 2u);
  // The offender may send a sane round 0 again: it gets the stored answer.
  EXPECT_TRUE(f.Send(Request(1, 0, {Fp32Update(0, {1, 1})}))->Wait().ok());
}

// The bound itself: |value| <= 1e30 is taken, the next float above is not,
// for values and for scalers; negative values alike.
TEST(RoundAggregatorTest, TheMagnitudeBoundIsInclusive) {
  Fixture f(1);
  RegisterAll(f.gs.get(), 1, {2}, CodecId::kTernGrad, Layout::kTernary2Bit);
  const auto codec = Codec(CodecId::kTernGrad, Layout::kTernary2Bit);
  auto ternary = [&](float scaler) {
    kernels::EncodeContext context;
    context.scaler = scaler;
    return ChunkPayload{0, *codec->Encode(std::vector<float>{scaler, 0},
                                          context)};
  };
  const float above = std::nextafter(1e30f, 2e30f);
  auto code = [&](uint64_t round, ChunkPayload update) {
    return f.Send(Request(0, round, {std::move(update)}))->Wait().status();
  };
  EXPECT_TRUE(code(0, ternary(1e30f)).ok());
  EXPECT_TRUE(code(1, Fp32Update(0, {-1e30f, 1e30f})).ok());
  EXPECT_EQ(code(2, ternary(above)).code(), absl::StatusCode::kInvalidArgument);
  ChunkPayload big_scaler = ternary(1);
  big_scaler.payload.scalers[0] = 3.4e38f;
  const absl::Status status = code(2, big_scaler);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("round 2: chunk 0 of data center 0: scaler is "
                              "3.4e+38"),
                    HasSubstr("1e+30")));
  EXPECT_EQ(code(2, Fp32Update(0, {0, -above})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(code(2, Fp32Update(0, {0, 1})).ok());
  EXPECT_TRUE(f.gs->run_status().ok());
}

// --- registration ---

TEST(RegisterTest, RejoinIsIdempotentAndAnswersTheNextRound) {
  Fixture f(2);
  RegisterAll(f.gs.get(), 2, {1});
  auto a = f.Send(Request(0, 0));
  auto b = f.Send(Request(1, 0));
  f.Send(Request(0, 1));
  ASSERT_TRUE(a->done());
  // Data center 0 restarts from a checkpoint: its parameters moved on.
  RegisterRequest again = Registration(0, 2, {1});
  again.param_checksum = 0x9999;
  absl::StatusOr<RegisterReply> reply = f.gs->Register(again);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->next_round, 2u);
  reply = f.gs->Register(Registration(1, 2, {1}));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->next_round, 1u);
  EXPECT_EQ(reply->t_global_s, absl::ToDoubleSeconds(kTGlobal));
  EXPECT_EQ(reply->hold_timeout_s, absl::ToDoubleSeconds(kHoldTimeout));
  EXPECT_EQ(reply->max_lag, 2u);
}

TEST(RegisterTest, AModelOfNoElementsIsRefused) {
  Fixture f(2);
  for (const std::vector<uint64_t>& elements :
       {std::vector<uint64_t>{}, std::vector<uint64_t>{0, 0}}) {
    EXPECT_EQ(f.gs->Register(Registration(0, 2, elements)).status(),
              absl::InvalidArgumentError("data center 0 registers a model of "
                                         "0 elements: there is nothing to "
                                         "average"));
  }
  // Refused registrations fix nothing; a chunk of 0 elements beside
  // others is a model like any other.
  ASSERT_TRUE(f.gs->Register(Registration(0, 2, {0, 3})).ok());
  EXPECT_TRUE(f.gs->Register(Registration(1, 2, {0, 3})).ok());
}

TEST(RegisterTest, DefaultLayoutsAreResolved) {
  Fixture f(2);
  ASSERT_TRUE(f.gs->Register(Registration(0, 2, {4}, CodecId::kTernGrad,
                                          Layout::kUnspecified))
                  .ok());
  // The same encoding named explicitly matches.
  EXPECT_TRUE(f.gs->Register(Registration(1, 2, {4}, CodecId::kTernGrad,
                                          Layout::kTernary2Bit))
                  .ok());
}

TEST(RegisterTest, MismatchesNameBothValues) {
  struct Case {
    std::function<void(RegisterRequest*)> change;
    absl::StatusCode code;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](RegisterRequest* r) { r->datacenter = 3; },
       absl::StatusCode::kInvalidArgument,
       {"datacenter 3 is not below --num_datacenters=3"}},
      {[](RegisterRequest* r) { r->num_datacenters = 4; },
       absl::StatusCode::kInvalidArgument,
       {"num_datacenters=4", "--num_datacenters=3"}},
      {[](RegisterRequest* r) { r->param_spec_hash = 0xEEEE; },
       absl::StatusCode::kFailedPrecondition,
       {"param spec hash 0x000000000000eeee of data center 1 differs from "
        "0x000000000000abcd of data center 0"}},
      {[](RegisterRequest* r) { r->param_checksum = 0x77; },
       absl::StatusCode::kFailedPrecondition,
       {"param checksum 0x0000000000000077", "0x0000000000001234"}},
      {[](RegisterRequest* r) { r->chunk_elements.push_back(9); },
       absl::StatusCode::kFailedPrecondition,
       {"chunk count 3 of data center 1 differs from 2"}},
      {[](RegisterRequest* r) { r->chunk_elements[1] = 6; },
       absl::StatusCode::kFailedPrecondition,
       {"chunk 1 has 6 elements at data center 1, but 5 at data center 0"}},
      {[](RegisterRequest* r) {
         r->update_codec = CodecId::kFp32;
         r->update_layout = Layout::kRaw;
       },
       absl::StatusCode::kFailedPrecondition,
       {"update codec fp32", "differs from terngrad"}},
      {[](RegisterRequest* r) { r->update_layout = Layout::kTernaryBase3; },
       absl::StatusCode::kFailedPrecondition,
       {"update layout TERNARY_BASE3", "differs from TERNARY_2BIT"}},
      {[](RegisterRequest* r) { r->fp32_chunk_keys = {1}; },
       absl::StatusCode::kFailedPrecondition,
       {"fp32 chunk keys [1] of data center 1 differs from []"}},
      {[](RegisterRequest* r) { r->update_codec = CodecId::kQsgd; },
       absl::StatusCode::kInvalidArgument,
       {"update codec qsgd", "is not one the GS averages"}},
      {[](RegisterRequest* r) {
         r->update_codec = CodecId::kFp32;
         r->update_layout = Layout::kIndexValue;
       },
       absl::StatusCode::kInvalidArgument,
       {"update codec fp32 with layout INDEX_VALUE"}},
      {[](RegisterRequest* r) { r->fp32_chunk_keys = {2}; },
       absl::StatusCode::kInvalidArgument,
       {"fp32 chunk key 2 is beyond the model's 2 chunks"}},
      {[](RegisterRequest* r) {
         r->fp32_chunk_keys = {1, 0};
       },
       absl::StatusCode::kInvalidArgument,
       {"not strictly ascending"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    Fixture f(3);
    const auto base = [] {
      return Registration(0, 3, {4, 5}, CodecId::kTernGrad,
                          Layout::kTernary2Bit);
    };
    ASSERT_TRUE(f.gs->Register(base()).ok());
    RegisterRequest request = base();
    request.datacenter = 1;
    cases[i].change(&request);
    const absl::Status status = f.gs->Register(request).status();
    EXPECT_EQ(status.code(), cases[i].code) << i << ": " << status;
    for (const std::string& part : cases[i].parts) {
      EXPECT_THAT(status.message(), HasSubstr(part)) << i;
    }
    // A refused registration registers nothing.
    EXPECT_EQ(f.Send(Request(1, 0))->Wait().status().code(),
              absl::StatusCode::kFailedPrecondition)
        << i;
  }
}

TEST(RegisterTest, RefusesAModelWhoseAnswerWouldNotFit) {
  RoundAggregatorOptions options;
  options.num_datacenters = 1;
  options.max_message_bytes = 2ull << 20;
  auto gs = *RoundAggregator::Create(options, MakeNullLogger());
  // 1 MiB of slack + 4 bytes per fp32 element: 262144 elements fit.
  EXPECT_TRUE(gs->Register(Registration(0, 1, {200000})).ok());
  auto other = *RoundAggregator::Create(options, MakeNullLogger());
  const absl::Status status =
      other->Register(Registration(0, 1, {300000})).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--max_message_mb"));
  // TernGrad answers are 2 bits per element: the same model fits.
  auto tern = *RoundAggregator::Create(options, MakeNullLogger());
  EXPECT_TRUE(tern->Register(Registration(0, 1, {300000}, CodecId::kTernGrad,
                                          Layout::kUnspecified))
                  .ok());
  // Absurd counts are refused, not overflowed.
  auto huge = *RoundAggregator::Create(options, MakeNullLogger());
  EXPECT_FALSE(
      huge->Register(Registration(0, 1, {~uint64_t{0}, ~uint64_t{0}})).ok());
}

TEST(RegisterTest, Fp32ChunksTravelInFp32WhateverTheUpdateCodec) {
  Fixture f(1);
  RegisterRequest request =
      Registration(0, 1, {8, 2}, CodecId::kTernGrad, Layout::kTernary2Bit);
  request.fp32_chunk_keys = {1};
  ASSERT_TRUE(f.gs->Register(request).ok());
  auto p = f.Send(Request(0, 0, {Fp32Update(1, {1.5f, -2})}));
  const absl::StatusOr<RoundAnswerPtr> answer = p->Wait();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ((*answer)->average[0].payload.codec, CodecId::kFp32);
  ExpectSameBits(DecodeFp32((*answer)->average[0].payload), {1.5f, -2});
}

// An LPS's final synchronization sends fp32 RAW for chunks registered as
// terngrad (server/WEIGHTGRAD.md): they are averaged with the others and
// that round's answer of the chunk is fp32; the next round is terngrad
// again.
TEST(RoundAggregatorTest, Fp32UpdatesOfATernGradChunkAreAnsweredInFp32) {
  constexpr uint64_t kN = 33;
  Fixture f(2);
  RegisterAll(f.gs.get(), 2, {kN}, CodecId::kTernGrad, Layout::kTernary2Bit);
  const auto ternary = Codec(CodecId::kTernGrad, Layout::kTernary2Bit);
  kernels::EncodeContext context;
  context.stream = RandomStream{kSeed, 0, 0, 1};
  const kernels::Payload tern = *ternary->Encode(Values(kN, 3), context);
  std::vector<float> tern_values(kN);
  ASSERT_TRUE(ternary->Decode(tern, absl::MakeSpan(tern_values)).ok());
  const std::vector<float> exact = Values(kN, 4);
  auto p0 = f.Send(Request(0, 0, {Fp32Update(0, exact)}));
  auto p1 = f.Send(Request(1, 0, {ChunkPayload{0, tern}}));
  const absl::StatusOr<RoundAnswerPtr> answer = p0->Wait();
  ASSERT_TRUE(answer.ok()) << answer.status();
  const kernels::Payload& got = (*answer)->average[0].payload;
  EXPECT_EQ(got.codec, CodecId::kFp32);
  EXPECT_EQ(got.layout, Layout::kRaw);
  std::vector<float> expected(kN);
  for (uint64_t j = 0; j < kN; ++j) {
    expected[j] = (exact[j] + tern_values[j]) / 2.0f;
  }
  ExpectSameBits(DecodeFp32(got), expected);

  auto q0 = f.Send(Request(0, 1, {ChunkPayload{0, tern}}));
  auto q1 = f.Send(Request(1, 1, {ChunkPayload{0, tern}}));
  const absl::StatusOr<RoundAnswerPtr> next = q0->Wait();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)->average[0].payload.codec, CodecId::kTernGrad);
}

// --- options and shutdown ---

TEST(RoundAggregatorTest, CreateRefusesOptionsThatCannotWork) {
  RoundAggregatorOptions options;
  options.num_datacenters = 0;
  EXPECT_EQ(RoundAggregator::Create(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = RoundAggregatorOptions();
  options.t_global = absl::ZeroDuration();
  EXPECT_FALSE(RoundAggregator::Create(options, nullptr).ok());
  options = RoundAggregatorOptions();
  options.hold_timeout = -absl::Seconds(1);
  EXPECT_FALSE(RoundAggregator::Create(options, nullptr).ok());
  options = RoundAggregatorOptions();
  options.clock = nullptr;
  EXPECT_FALSE(RoundAggregator::Create(options, nullptr).ok());
  // K * (max_lag + 2) updates of up to 1e30 must not overflow a sum:
  // 1e8 is the most (kMaxRoundSummands), to the update.
  // (The answer cache allocates nothing up front, so a large max_lag is
  // cheap here; K data centers would take K entries.)
  options = RoundAggregatorOptions();
  options.num_datacenters = 1000;
  options.max_lag = kMaxRoundSummands / 1000 - 2;
  EXPECT_TRUE(RoundAggregator::Create(options, nullptr).ok());
  options.max_lag += 1;
  const absl::Status status =
      RoundAggregator::Create(options, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("--num_datacenters=1000 with --max_lag=99999 lets a "
                        "round add 100001000 updates"));
}

TEST(RoundAggregatorTest, CloseAnswersPendingAndLaterCalls) {
  Fixture f(2);
  RegisterAll(f.gs.get(), 2, {1});
  auto pending = f.Send(Request(0, 0));
  f.gs->Close(absl::UnavailableError("the global server is shutting down"));
  EXPECT_EQ(pending->Wait().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.Send(Request(1, 0))->Wait().status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.gs->Register(Registration(1, 2, {1})).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tern::global

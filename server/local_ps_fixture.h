// The fixture of the LocalPs tests (local_ps_test.cc, the basics;
// local_ps_recovery_test.cc, a resumed LPS): a gaia run of two workers over
// a two-chunk model, with a fake clock.
#ifndef TERN_SERVER_LOCAL_PS_FIXTURE_H_
#define TERN_SERVER_LOCAL_PS_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/lr_schedule.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_registry.h"
#include "server/local_ps.h"
#include "server/lps_state.h"
#include "server/messages.h"

namespace tern::server {

inline constexpr float kLr = 0.5f;

inline std::unique_ptr<kernels::Codec> Fp32() {
  kernels::CodecOptions options;
  options.id = kernels::CodecId::kFp32;
  options.push_layout = kernels::Layout::kRaw;
  options.pull_layout = kernels::Layout::kRaw;
  return *kernels::MakeCodec(options);
}

inline kernels::Payload Encode(const std::vector<float>& values) {
  return *Fp32()->Encode(values, kernels::EncodeContext());
}

inline std::vector<float> Decode(const kernels::Payload& payload) {
  std::vector<float> values(payload.num_elements);
  EXPECT_TRUE(Fp32()->Decode(payload, absl::MakeSpan(values)).ok());
  return values;
}

// A gaia run (fp32 gradients and weights) of a model with tensors of 33 and
// 5 elements (two chunks), momentum 0, so every step is W -= lr * g.
class LocalPsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = {std::vector<float>(33), std::vector<float>(5)};
    for (size_t k = 0; k < weights_.size(); ++k) {
      for (size_t i = 0; i < weights_[k].size(); ++i) {
        weights_[k][i] = 0.25f * static_cast<float>(i) - 1.0f + k;
      }
    }
    std::vector<LpsChunk> chunks;
    for (uint32_t k = 0; k < weights_.size(); ++k) {
      chunks.push_back(LpsChunk{k, weights_[k]});
    }
    checksum_ = (*LpsState::Create(
                     LpsStateOptions{},
                     *LrSchedule::Create(LrScheduleKind::kConstant, 0, 1, 1, 1),
                     std::move(chunks)))
                    ->Checksum();
  }

  std::unique_ptr<LocalPs> MakeLps(bool global,
                                   uint64_t max_message_bytes = 64ull << 20,
                                   const std::string& run_id = "") {
    return *CreateLps(global, max_message_bytes, run_id);
  }

  absl::StatusOr<std::unique_ptr<LocalPs>> CreateLps(
      bool global, uint64_t max_message_bytes = 64ull << 20,
      const std::string& run_id = "") {
    LocalPsOptions options;
    options.run_id = run_id;
    options.max_message_bytes = max_message_bytes;
    options.mode = RunMode::kGaia;
    options.num_workers = num_workers_;
    options.weight_codec = kernels::CodecId::kFp32;
    options.global = global;
    options.sync_every = 1;
    options.hold_limit = absl::Seconds(5);
    options.clock = [this] { return now_; };
    options.state_path = state_path_;
    options.checkpoint_every = checkpoint_every_;
    return LocalPs::Create(options, logger_);
  }

  JoinRequest Join(uint32_t worker) const {
    JoinRequest request;
    request.worker_id = worker;
    request.config.run_id = "test";
    request.config.num_workers = 2;
    request.config.num_shards = 1;
    request.config.partition_bytes = 4 << 20;
    request.config.codec = kernels::CodecId::kFp32;
    request.config.mode = RunMode::kGaia;
    request.config.optimizer.lr = kLr;
    request.config.optimizer.lr_schedule = "constant";
    request.config.optimizer.lr_step_every = 1;
    request.config.optimizer.steps = steps_;
    request.tensors = {TensorSpec{"a", {33}}, TensorSpec{"b", {5}}};
    request.param_spec_hash = 7;
    request.param_checksum = checksum_;
    if (worker == 0) {
      for (uint32_t k = 0; k < weights_.size(); ++k) {
        request.initial_weights.push_back(ChunkPayload{k, Encode(weights_[k])});
      }
    }
    return request;
  }

  // Joins both workers; both must be answered.
  void JoinBoth(LocalPs& lps) {
    std::vector<absl::StatusOr<JoinReply>> replies;
    for (const uint32_t worker : {1u, 0u}) {
      lps.Join(Join(worker), [&](absl::StatusOr<JoinReply> reply) {
        replies.push_back(std::move(reply));
      });
    }
    ASSERT_EQ(replies.size(), 2u);
    for (const auto& reply : replies) {
      ASSERT_TRUE(reply.ok()) << reply.status();
      EXPECT_EQ(reply->chunk_keys, (std::vector<uint32_t>{0, 1}));
    }
  }

  PushRequest Push(uint32_t worker, uint64_t step, float g) const {
    PushRequest request;
    request.worker_id = worker;
    request.step = step;
    for (uint32_t k = 0; k < weights_.size(); ++k) {
      request.chunks.push_back(
          ChunkPayload{k, Encode(std::vector<float>(weights_[k].size(), g))});
    }
    return request;
  }

  // Pushes and returns where the answer lands (empty until answered).
  std::shared_ptr<std::optional<absl::StatusOr<PushAnswer>>> PushAsync(
      LocalPs& lps, const PushRequest& request) {
    auto answer = std::make_shared<std::optional<absl::StatusOr<PushAnswer>>>();
    lps.PushPull(request, [answer](absl::StatusOr<PushAnswer> a) {
      *answer = std::move(a);
    });
    return answer;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  // The LPS's logger (none: a null one).
  Logger logger_;
  std::vector<std::vector<float>> weights_;
  uint64_t checksum_ = 0;
  uint64_t steps_ = 3;
  // --state_dir's file and --checkpoint_every (server/lps_state_file.h).
  std::string state_path_;
  uint64_t checkpoint_every_ = 0;
  // The LPS's --num_workers (the joins are those of workers 0 and 1).
  uint32_t num_workers_ = 2;
};

}  // namespace tern::server

#endif  // TERN_SERVER_LOCAL_PS_FIXTURE_H_

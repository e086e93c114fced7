// GradientSynchronizer's side of the GS's answers: decoding and checking an
// answer, applying it, and when the GS's silence must hold the workers.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/payload_validation.h"
#include "kernels/payload.h"
#include "server/gradient_synchronizer.h"

namespace tern::server {

absl::StatusOr<const kernels::Codec*> GradientSynchronizer::AnswerCodec(
    kernels::CodecId id) const {
  const auto it = answer_codecs_.find(id);
  if (it == answer_codecs_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("codec %s; answers are fp32, fp16, terngrad or int8",
                        kernels::CodecName(id)));
  }
  return it->second.get();
}

absl::StatusOr<std::vector<float>> GradientSynchronizer::DecodeAnswerChunk(
    const WaitingRound& waiting, size_t index,
    const kernels::Payload& payload) const {
  const ChunkSync& chunk = chunks_[index];
  auto invalid = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "answer to round %d, chunk %d: %s", waiting.round, chunk.key, what));
  };
  absl::StatusOr<const kernels::Codec*> codec = AnswerCodec(payload.codec);
  if (!codec.ok()) return invalid(codec.status().message());
  std::vector<float> values(chunk.last_weights.size());
  if (absl::Status status = (*codec)->Decode(payload, absl::MakeSpan(values));
      !status.ok()) {
    return invalid(status.message());
  }
  // The magnitude rule (core/payload_validation.h), as for a worker's
  // push: a corrupt or hostile answer must not poison this data center.
  for (const float scaler : payload.scalers) {
    if (absl::Status status = core::CheckMagnitude("scaler", scaler);
        !status.ok()) {
      return invalid(status.message());
    }
  }
  if (const size_t i = core::FirstBeyondMagnitude(values); i < values.size()) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "answer to round %d, chunk %d has %g at element %d", waiting.round,
          chunk.key, values[i], i));
    }
    return invalid(
        core::CheckMagnitude(absl::StrCat("element ", i), values[i]).message());
  }
  // And what ApplyAnswer would make of W_last and W (in double: no
  // overflow), so that nothing changes unless all of it stays within 1e30.
  const absl::Span<const float> weights = *state_->Weights(chunk.key);
  const auto sent_it = waiting.sent_updates.find(chunk.key);
  for (size_t i = 0; i < values.size(); ++i) {
    const double last = double{chunk.last_weights[i]} + values[i];
    const double sent =
        sent_it == waiting.sent_updates.end() ? 0.0 : sent_it->second[i];
    const double weight =
        last + ((double{weights[i]} - chunk.last_weights[i]) - sent);
    const double worst = std::max(std::fabs(last), std::fabs(weight));
    if (worst > core::kMaxMagnitude) {
      return invalid(absl::StrCat(
          "applying it would take element ", i, "'s weight to ", worst,
          ", beyond ", core::kMaxMagnitude,
          " (the magnitude rule: the LPS keeps its weights within 1e30; see "
          "global/README.md)"));
    }
  }
  return values;
}

absl::Status GradientSynchronizer::ApplyAnswer(
    uint64_t round, absl::Span<const ChunkPayload> average) {
  if (waiting_.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "an answer to round %d, but no round waits for one", round));
  }
  const WaitingRound& waiting = waiting_.front();
  if (round != waiting.round) {
    return absl::FailedPreconditionError(
        absl::StrFormat("an answer to round %d, but round %d waits for its "
                        "answer first",
                        round, waiting.round));
  }
  // Decode and check everything before anything changes.
  std::vector<std::pair<size_t, std::vector<float>>> decoded;
  absl::flat_hash_set<uint32_t> seen;
  for (const ChunkPayload& chunk : average) {
    const auto it = index_.find(chunk.chunk_key);
    if (it == index_.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("answer to round %d has chunk %d, which is not on "
                          "this LPS shard",
                          round, chunk.chunk_key));
    }
    if (!seen.insert(chunk.chunk_key).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "answer to round %d has chunk %d twice", round, chunk.chunk_key));
    }
    absl::StatusOr<std::vector<float>> values =
        DecodeAnswerChunk(waiting, it->second, chunk.payload);
    if (!values.ok()) return values.status();
    decoded.emplace_back(it->second, *std::move(values));
  }
  for (const auto& [key, sent] : waiting.sent_updates) {
    if (!seen.contains(key)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk %d was sent in round %d but the answer lacks it", key, round));
    }
  }

  for (const auto& [index, answer] : decoded) {
    ChunkSync& chunk = chunks_[index];
    const absl::Span<float> weights = *state_->MutableWeights(chunk.key);
    const auto sent_it = waiting.sent_updates.find(chunk.key);
    const float* sent = sent_it == waiting.sent_updates.end()
                            ? nullptr
                            : sent_it->second.data();
    for (size_t i = 0; i < answer.size(); ++i) {
      // W += A - U_sent, written as W_last + A + (what stays in U): when
      // everything was sent exactly (fp32), the residual is exactly 0 and
      // every data center lands on the same bits, W = W_last + A.
      const float residual =
          (weights[i] - chunk.last_weights[i]) - (sent ? sent[i] : 0.0f);
      chunk.last_weights[i] += answer[i];
      weights[i] = chunk.last_weights[i] + residual;
    }
  }
  waiting_.pop_front();
  last_answer_time_ = options_.clock();
  return absl::OkStatus();
}

bool GradientSynchronizer::MustHold(absl::Time now) const {
  if (waiting_.empty()) return false;
  const absl::Time since = std::max(waiting_.front().sent, last_answer_time_);
  return now - since >= options_.sync_timeout;
}

}  // namespace tern::server

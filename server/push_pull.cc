#include "server/push_pull.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/payload_validation.h"
#include "kernels/float_aggregation.h"
#include "kernels/terngrad.h"

namespace tern::server {
namespace {

absl::Span<const uint8_t> Bytes(const kernels::Payload& payload) {
  return absl::MakeConstSpan(
      reinterpret_cast<const uint8_t*>(payload.data.data()),
      payload.data.size());
}

// One chunk of a push: the header against the chunk, then the data once.
absl::Status CheckChunk(const ShardChunk& chunk, const kernels::Payload& push,
                        float shared_scaler, kernels::DecodedValues* values) {
  core::PayloadExpectation expect;
  expect.codec = chunk.codec->id();
  expect.layout = chunk.push_layout;
  expect.num_elements = chunk.num_elements;
  expect.reader = "this shard";
  // TernGrad sums codes: every push of a chunk must use the shared scaler
  // s_k (DESIGN section 3, step 4).
  if (chunk.shares_scaler) expect.shared_scaler = shared_scaler;
  if (absl::Status status = core::ValidatePayload(push, expect); !status.ok()) {
    return status;
  }
  if (chunk.shares_scaler) {
    // Codes in {-1, 0, 1} times a finite scaler are finite: only the codes
    // need checking, and they are added as they are.
    return kernels::CheckTernaryCodes(Bytes(push), chunk.num_elements,
                                      push.layout);
  }
  values->resize(chunk.num_elements);  // not zero-filled: decoded over
  return core::DecodeFinite(*chunk.codec, push, absl::MakeSpan(*values));
}

}  // namespace

absl::StatusOr<MatchedPush> MatchChunks(const PushRequest& request,
                                        const ShardRun& run,
                                        const ScalerAnswer& shared,
                                        uint32_t shard_index) {
  const uint32_t worker = request.worker_id;
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", request.step, ": ", parts...));
  };
  // Nothing is sized from a count beyond the shard's chunks.
  if (request.chunks.size() > run.keys.size()) {
    return invalid("worker ", worker, " pushed ", request.chunks.size(),
                   " chunks; shard ", shard_index, " owns ", run.keys.size());
  }
  MatchedPush matched;
  matched.chunks.assign(request.chunks.size(), nullptr);
  matched.shared_scalers.assign(request.chunks.size(), 0.0f);
  absl::flat_hash_set<uint32_t> seen;
  for (size_t i = 0; i < request.chunks.size(); ++i) {
    const uint32_t key = request.chunks[i].chunk_key;
    ShardChunk* chunk = run.Find(key);
    if (chunk == nullptr) {
      return invalid("chunk ", key, " of worker ", worker,
                     " is not a chunk of shard ", shard_index);
    }
    if (!seen.insert(key).second) {
      return invalid("chunk ", key, " of worker ", worker, " appears twice");
    }
    matched.chunks[i] = chunk;
    if (chunk->shares_scaler) {
      matched.shared_scalers[i] = shared->scalers[chunk->scaler_slot].scaler;
    }
  }
  if (seen.size() != run.keys.size()) {
    for (const uint32_t key : run.keys) {
      if (!seen.contains(key)) {
        return invalid("worker ", worker, " pushed no chunk ", key);
      }
    }
  }
  return matched;
}

absl::StatusOr<CheckedPush> CheckPush(const PushRequest& request,
                                      const MatchedPush& matched) {
  CheckedPush checked;
  checked.values.resize(matched.chunks.size());
  for (size_t i = 0; i < matched.chunks.size(); ++i) {
    const ShardChunk& chunk = *matched.chunks[i];
    if (absl::Status status =
            CheckChunk(chunk, request.chunks[i].payload,
                       matched.shared_scalers[i], &checked.values[i]);
        !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", request.step, ": chunk ", chunk.key,
                       " of worker ", request.worker_id, ": ",
                       status.message()));
    }
  }
  return checked;
}

absl::Status AddPush(const PushRequest& request, const MatchedPush& matched,
                     CheckedPush checked, size_t* added) {
  const uint32_t worker = matched.slot;
  for (*added = 0; *added < matched.chunks.size(); ++*added) {
    const size_t i = *added;
    ShardChunk& chunk = *matched.chunks[i];
    absl::MutexLock chunk_lock(&chunk.mu);
    auto* decoded_sum =
        dynamic_cast<kernels::FloatAggregation*>(chunk.aggregation.get());
    // Every aggregation of a codec that is not Summable() is a
    // FloatAggregation today; one that is not would decode again in Add.
    const absl::Status status =
        decoded_sum != nullptr && !chunk.shares_scaler
            ? decoded_sum->AddDecoded(worker, std::move(checked.values[i]))
            : chunk.aggregation->Add(worker, request.chunks[i].payload);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<PushAnswer> PushBarrier::Complete(ShardRun& run, uint64_t open,
                                                 uint32_t num_workers) {
  auto reply = std::make_shared<PushReply>();
  reply->step = open;
  reply->chunks.reserve(run.chunks.size());
  for (const std::unique_ptr<ShardChunk>& chunk : run.chunks) {
    absl::MutexLock chunk_lock(&chunk->mu);
    absl::StatusOr<kernels::Payload> sum = chunk->aggregation->Finish();
    if (!sum.ok()) {
      return absl::InternalError(absl::StrCat(
          "step ", open, ": chunk ", chunk->key,
          ": the aggregate could not be built: ", sum.status().message()));
    }
    reply->chunks.push_back(ChunkPayload{chunk->key, *std::move(sum)});
    chunk->Open(run.config.seed, open + 1, num_workers);
  }
  return PushAnswer(std::move(reply));
}

}  // namespace tern::server

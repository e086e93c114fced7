#include "worker/scaler_sharing.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/step_protocol.h"

namespace tern::worker {
namespace {

using tern::v1::ShareScalersRequest;
using tern::v1::ShareScalersResponse;

// Takes shard `shard`'s answer into `scalers`.
absl::Status TakeSharedScalers(const PsClient& client, const ChunkPlan& plan,
                               uint32_t shard, uint64_t step,
                               const ShareScalersResponse& response,
                               std::vector<float>* scalers) {
  const std::vector<uint32_t>& keys = plan.shard_scaler_chunks[shard];
  std::vector<bool> seen(plan.partition.chunks().size(), false);
  size_t answered = 0;
  for (const tern::v1::ChunkScaler& shared : response.scalers()) {
    const uint32_t key = shared.chunk_key();
    if (!std::binary_search(keys.begin(), keys.end(), key) || seen[key] ||
        !std::isfinite(shared.scaler()) || shared.scaler() < 0) {
      return absl::InternalError(absl::StrCat(
          "step ", step, ": shard ", shard, " (", client.name(shard),
          ") answered ShareScalers with an unexpected, repeated or "
          "invalid scaler ",
          shared.scaler(), " for chunk ", key));
    }
    seen[key] = true;
    (*scalers)[key] = shared.scaler();
    ++answered;
  }
  if (answered != keys.size() || response.step() != step) {
    return absl::InternalError(
        absl::StrCat("step ", step, ": shard ", shard, " (", client.name(shard),
                     ") answered ShareScalers for step ", response.step(),
                     " with ", answered, " of ", keys.size(), " scalers"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ShareScalers(PsClient& client, const ChunkPlan& plan,
                          uint32_t worker_id, uint64_t step,
                          std::vector<float>* scalers, StepRecord* record) {
  std::vector<uint32_t> all(plan.partition.num_shards());
  for (uint32_t shard = 0; shard < all.size(); ++shard) all[shard] = shard;
  return ShareScalersWith(client, plan, worker_id, step, all, scalers, record);
}

absl::Status ShareScalersWith(PsClient& client, const ChunkPlan& plan,
                              uint32_t worker_id, uint64_t step,
                              const std::vector<uint32_t>& shards,
                              std::vector<float>* scalers, StepRecord* record) {
  std::vector<ShardRequest<ShareScalersRequest>> requests;
  for (const uint32_t shard : shards) {
    ShardRequest<ShareScalersRequest> request;
    request.shard = shard;
    request.request.set_worker_id(worker_id);
    request.request.set_step(step);
    for (const uint32_t key : plan.shard_scaler_chunks[shard]) {
      auto* scaler = request.request.add_scalers();
      scaler->set_chunk_key(key);
      scaler->set_scaler((*scalers)[key]);
    }
    record->push_msg_bytes += request.request.ByteSizeLong();
    requests.push_back(std::move(request));
  }
  std::vector<uint32_t> asked;
  for (const auto& request : requests) asked.push_back(request.shard);
  absl::StatusOr<std::vector<ShareScalersResponse>> responses =
      client.ShareScalers(std::move(requests));
  if (!responses.ok()) return AtStep(step, responses.status());
  for (size_t r = 0; r < responses->size(); ++r) {
    record->pull_msg_bytes += (*responses)[r].ByteSizeLong();
    if (absl::Status taken = TakeSharedScalers(client, plan, asked[r], step,
                                               (*responses)[r], scalers);
        !taken.ok()) {
      return taken;
    }
  }
  return absl::OkStatus();
}

}  // namespace tern::worker

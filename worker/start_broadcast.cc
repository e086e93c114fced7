#include "worker/start_broadcast.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/checksum.h"
#include "core/payload_validation.h"
#include "core/wire.h"

namespace tern::worker {

std::vector<tern::v1::JoinRequest> JoinRequestsWithStart(
    const tern::v1::JoinRequest& base, const ChunkPlan& plan,
    const ParamBuffer& params, const kernels::Codec& fp32) {
  std::vector<tern::v1::JoinRequest> requests(plan.partition.num_shards(),
                                              base);
  if (base.worker_id() == 0) AddStartWeights(plan, params, fp32, &requests);
  return requests;
}

void AddStartWeights(const ChunkPlan& plan, const ParamBuffer& params,
                     const kernels::Codec& fp32,
                     std::vector<tern::v1::JoinRequest>* per_shard) {
  std::vector<float> flat(params.total_elements());
  params.GatherParameters(absl::MakeSpan(flat));
  for (const Chunk& chunk : plan.partition.chunks()) {
    absl::StatusOr<kernels::Payload> payload =
        fp32.Encode(absl::MakeConstSpan(flat).subspan(chunk.flat_offset,
                                                      chunk.num_elements),
                    kernels::EncodeContext());
    tern::v1::ChunkPayload* wire =
        (*per_shard)[chunk.shard].add_initial_weights();
    wire->set_chunk_key(chunk.key);
    // fp32 encoding cannot fail; the servers refuse values that are not
    // finite.
    if (payload.ok()) {
      core::PayloadToWire(*std::move(payload), wire->mutable_payload());
    }
  }
}

absl::Status LoadStart(const std::vector<tern::v1::JoinResponse>& responses,
                       const ChunkPlan& plan, const kernels::Codec& fp32,
                       ParamBuffer* params, const StartSource& source) {
  std::vector<float> flat(params->total_elements());
  const std::vector<Chunk>& chunks = plan.partition.chunks();
  for (uint32_t shard = 0; shard < responses.size(); ++shard) {
    const tern::v1::JoinResponse& response = responses[shard];
    const std::vector<uint32_t>& keys = plan.shard_chunks[shard];
    if (static_cast<size_t>(response.initial_weights_size()) != keys.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard, " sent ", source.whose, " weights of ",
                       response.initial_weights_size(), " chunks, not of its ",
                       keys.size(), source.missing_hint));
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const tern::v1::ChunkPayload& wire = response.initial_weights(i);
      const Chunk& chunk = chunks[keys[i]];
      if (wire.chunk_key() != chunk.key) {
        return absl::FailedPreconditionError(absl::StrCat(
            "shard ", shard, " sent chunk ", wire.chunk_key(), " of ",
            source.whose, " weights where chunk ", chunk.key, " belongs"));
      }
      absl::StatusOr<kernels::Payload> payload =
          core::PayloadFromWire(wire.payload());
      absl::Status decoded = payload.status();
      if (decoded.ok()) {
        decoded =
            core::DecodeFinite(fp32, *payload,
                               absl::MakeSpan(flat).subspan(
                                   chunk.flat_offset, chunk.num_elements));
      }
      if (!decoded.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source.whose, " weights of chunk ", chunk.key,
                         " from shard ", shard, ": ", decoded.message()));
      }
    }
  }
  params->ScatterParameters(flat);
  const uint64_t loaded = params->Checksum();
  if (loaded != responses.front().param_checksum()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the parameters loaded from the shards have checksum ",
                     FormatChecksum(loaded), ", ", source.whose, " are ",
                     FormatChecksum(responses.front().param_checksum())));
  }
  return absl::OkStatus();
}

}  // namespace tern::worker

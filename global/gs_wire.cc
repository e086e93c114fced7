#include "global/gs_wire.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/wire.h"

namespace tern::global {
namespace {

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

// Each chunk's payload, checked as core::PayloadFromWire does;
// INVALID_ARGUMENT prefixed with `where(chunk key)` for one that is not well
// formed.
template <typename Where>
absl::Status ChunksFromWire(
    const google::protobuf::RepeatedPtrField<tern::v1::ChunkPayload>& wire,
    std::vector<ChunkPayload>* out, Where where) {
  out->reserve(wire.size());
  for (const tern::v1::ChunkPayload& chunk : wire) {
    absl::StatusOr<kernels::Payload> payload =
        core::PayloadFromWire(chunk.payload());
    if (!payload.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(chunk.chunk_key()), ": ", payload.status().message()));
    }
    out->push_back(ChunkPayload{chunk.chunk_key(), *std::move(payload)});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RegisterRequest> RegisterFromWire(
    const tern::v1::RegisterRequest& wire) {
  RegisterRequest request;
  request.datacenter = wire.datacenter();
  request.num_datacenters = wire.num_datacenters();
  request.param_spec_hash = wire.param_spec_hash();
  request.param_checksum = wire.param_checksum();
  request.chunk_elements.assign(wire.chunk_elements().begin(),
                                wire.chunk_elements().end());
  const std::string prefix =
      absl::StrCat("registration of data center ", wire.datacenter());
  absl::StatusOr<kernels::CodecId> codec =
      core::CodecFromWire(wire.update_codec());
  if (!codec.ok()) return Prefixed(codec.status(), prefix);
  request.update_codec = *codec;
  absl::StatusOr<kernels::Layout> layout =
      core::LayoutFromWire(wire.update_layout());
  if (!layout.ok()) return Prefixed(layout.status(), prefix);
  request.update_layout = *layout;
  request.fp32_chunk_keys.assign(wire.fp32_chunk_keys().begin(),
                                 wire.fp32_chunk_keys().end());
  return request;
}

absl::StatusOr<SyncRequest> SyncFromWire(
    const tern::v1::SyncRoundRequest& wire) {
  SyncRequest request;
  request.datacenter = wire.datacenter();
  request.round = wire.round();
  absl::Status status =
      ChunksFromWire(wire.updates(), &request.updates, [&](uint32_t key) {
        return absl::StrCat("round ", wire.round(), ": chunk ", key,
                            " of data center ", wire.datacenter());
      });
  if (!status.ok()) return status;
  return request;
}

void RegisterToWire(const RegisterRequest& request,
                    tern::v1::RegisterRequest* out) {
  out->set_datacenter(request.datacenter);
  out->set_num_datacenters(request.num_datacenters);
  out->set_param_spec_hash(request.param_spec_hash);
  out->set_param_checksum(request.param_checksum);
  out->mutable_chunk_elements()->Assign(request.chunk_elements.begin(),
                                        request.chunk_elements.end());
  out->set_update_codec(static_cast<tern::v1::Codec>(request.update_codec));
  out->set_update_layout(static_cast<tern::v1::Layout>(request.update_layout));
  out->mutable_fp32_chunk_keys()->Assign(request.fp32_chunk_keys.begin(),
                                         request.fp32_chunk_keys.end());
}

void AnswerToWire(const RoundAnswer& answer, tern::v1::SyncRoundResponse* out) {
  out->set_round(answer.round);
  for (const ChunkPayload& chunk : answer.average) {
    tern::v1::ChunkPayload* wire = out->add_average();
    wire->set_chunk_key(chunk.chunk_key);
    core::PayloadToWire(chunk.payload, wire->mutable_payload());
  }
  out->mutable_lagging()->Assign(answer.lagging.begin(), answer.lagging.end());
  for (const Contribution& contribution : answer.contributions) {
    tern::v1::RoundContribution* wire = out->add_contributions();
    wire->set_datacenter(contribution.datacenter);
    wire->set_round(contribution.round);
  }
}

absl::StatusOr<RoundAnswer> AnswerFromWire(
    const tern::v1::SyncRoundResponse& wire) {
  RoundAnswer answer;
  answer.round = wire.round();
  absl::Status status =
      ChunksFromWire(wire.average(), &answer.average, [&](uint32_t key) {
        return absl::StrCat("the answer to round ", wire.round(), ": chunk ",
                            key);
      });
  if (!status.ok()) return status;
  answer.lagging.assign(wire.lagging().begin(), wire.lagging().end());
  for (const tern::v1::RoundContribution& contribution : wire.contributions()) {
    answer.contributions.push_back(
        Contribution{contribution.datacenter(), contribution.round()});
  }
  return answer;
}

}  // namespace tern::global

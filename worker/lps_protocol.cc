#include "worker/lps_protocol.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/philox.h"
#include "common/status_macros.h"
#include "core/wire.h"
#include "kernels/codec_registry.h"
#include "worker/local_scalers.h"
#include "worker/optimizer_factory.h"
#include "worker/start_broadcast.h"

namespace tern::worker {

using tern::v1::JoinResponse;
using tern::v1::PushPullRequest;
using tern::v1::PushPullResponse;

absl::StatusOr<std::unique_ptr<LpsProtocol>> LpsProtocol::Create(
    const WorkerOptions& options, ParamBuffer& params, const ChunkPlan& plan,
    const CodecSet& codecs, Logger logger) {
  std::unique_ptr<LpsProtocol> protocol(
      new LpsProtocol(options, params, plan, codecs, std::move(logger)));
  // The LPS's weight codecs (server/lps_state.h): ternary in the run's
  // push layout (2bit when the run pushes fp32), int8, fp32.
  kernels::CodecOptions ternary;
  ternary.id = kernels::CodecId::kTernGrad;
  ternary.push_layout = codecs.options().id == kernels::CodecId::kTernGrad
                            ? codecs.options().push_layout
                            : kernels::Layout::kTernary2Bit;
  kernels::CodecOptions int8;
  int8.id = kernels::CodecId::kInt8;
  for (const kernels::CodecOptions& weight :
       {ternary, int8, Fp32CodecOptions()}) {
    TERN_ASSIGN_OR_RETURN(protocol->weight_codecs_[weight.id],
                          kernels::MakeCodec(weight));
  }
  return protocol;
}

LpsProtocol::LpsProtocol(const WorkerOptions& options, ParamBuffer& params,
                         const ChunkPlan& plan, const CodecSet& codecs,
                         Logger logger)
    : options_(options),
      params_(params),
      plan_(plan),
      codecs_(codecs),
      logger_(std::move(logger)),
      weights_(params.total_elements()) {}

void LpsProtocol::AddToJoin(tern::v1::JoinRequest* request) const {
  tern::v1::RunConfig* config = request->mutable_config();
  config->set_mode(options_.mode == TrainMode::kGaia
                       ? tern::v1::MODE_GAIA
                       : tern::v1::MODE_WEIGHTGRAD);
  *config->mutable_optimizer() = LpsOptimizerConfig(options_);
  if (options_.worker_id != 0) return;
  // The LPS starts from worker 0's weights (every worker's are the same:
  // the checksum says so). The LPS is the plan's one shard.
  std::vector<tern::v1::JoinRequest> one(1);
  one[0].Swap(request);
  AddStartWeights(plan_, params_, codecs_.fp32(), &one);
  one[0].Swap(request);
}

absl::Status LpsProtocol::Step(PsClient& client, uint64_t step,
                               StepRecord* rec) {
  absl::Time phase = absl::Now();
  params_.GatherGradients();
  rec->compute_s += SecondsSince(phase);

  phase = absl::Now();
  std::vector<ShardRequest<PushPullRequest>> pushes(1);
  TERN_ASSIGN_OR_RETURN(pushes[0].request, EncodePush(step, rec));
  rec->encode_s = SecondsSince(phase);

  phase = absl::Now();
  absl::StatusOr<std::vector<PushPullResponse>> pulls =
      client.PushPull(std::move(pushes));
  if (!pulls.ok()) return AtStep(step, pulls.status());
  rec->network_s = SecondsSince(phase);

  phase = absl::Now();
  TERN_RETURN_IF_ERROR(LoadWeights(client, step, (*pulls)[0], rec));
  rec->decode_s = SecondsSince(phase);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> LpsProtocol::Recover(
    PsClient& client, uint64_t step, const absl::Status& failed,
    const tern::v1::JoinRequest& first_join) {
  // Only a restarted LPS refuses a push with OUT_OF_RANGE (PsClient does
  // not retry it); every other error ends the run as before.
  if (!absl::IsOutOfRange(failed)) return failed;
  // The same request as at the first join (the LPS checks the run, the
  // ParamSpec and the initial checksum again), but no start: the LPS keeps
  // the weights it restored.
  tern::v1::JoinRequest rejoin = first_join;
  rejoin.clear_initial_weights();
  absl::StatusOr<std::vector<JoinResponse>> responses = client.Join(rejoin);
  if (!responses.ok()) {
    return AtStep(step,
                  absl::Status(responses.status().code(),
                               absl::StrCat("rejoining the restarted LPS: ",
                                            responses.status().message())));
  }
  return LoadRejoin(client, step, *responses);
}

absl::StatusOr<uint64_t> LpsProtocol::LoadRejoin(
    const PsClient& client, uint64_t step,
    const std::vector<JoinResponse>& responses) {
  const JoinResponse& answer = responses.front();
  const uint64_t next = answer.next_step();
  const std::string lps = absl::StrCat("the LPS (", client.name(0), ")");
  // The LPS's state cannot hold a step past the one this worker pushed.
  if (next > step + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, ": ", lps, " restarted at step ", next,
                     ", past step ", step + 1, " where this worker continues"));
  }
  const std::vector<uint32_t>& keys = plan_.shard_chunks[0];
  if (!std::equal(answer.chunk_keys().begin(), answer.chunk_keys().end(),
                  keys.begin(), keys.end())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, ": ", lps, " rejoined with ", answer.chunk_keys_size(),
        " chunk keys, not this worker's ", keys.size(), " in key order"));
  }
  const StartSource restarted{"the restarted LPS's",
                              " (an LPS from before its resume?)"};
  if (absl::Status loaded =
          LoadStart(responses, plan_, codecs_.fp32(), &params_, restarted);
      !loaded.ok()) {
    return AtStep(
        step,
        absl::Status(loaded.code(),
                     absl::StrCat(lps, " at rejoin: ", loaded.message())));
  }
  // LoadStart checked the loaded weights against it: the final step's
  // check (CheckFinal) holds when the LPS's state held the last step.
  lps_checksum_ = answer.param_checksum();
  const std::string redo = next <= step
                               ? absl::StrCat("redoing ", step + 1 - next,
                                              " step(s) from step ", next)
                               : absl::StrCat("its state holds step ", step);
  logger_->warn("{} restarted from its state: rejoined at step {} ({})", lps,
                next, redo);
  return next;
}

absl::StatusOr<PushPullRequest> LpsProtocol::EncodePush(uint64_t step,
                                                        StepRecord* rec) {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  // Own scalers (and the NaN check).
  TERN_ASSIGN_OR_RETURN(
      const std::vector<float> scalers,
      LocalScalers(step, chunks, params_.gradients(), params_.names(),
                   static_cast<float>(options_.clip)));
  PushPullRequest push;
  push.set_worker_id(options_.worker_id);
  push.set_step(step);
  // Evaluate the LPS's model, not one quantized draw of it (the answer to
  // the last step is fp32 anyway).
  push.set_fp32_weights(Every(options_.eval_every, step));
  for (const Chunk& chunk : chunks) {
    kernels::EncodeContext context;
    context.stream = RandomStream{options_.seed, static_cast<uint32_t>(step),
                                  chunk.key, options_.DataSlice()};
    // No scaler sharing: the LPS applies each gradient on its own, so the
    // worker's own s_ik = min(c * sigma, max|g|) is the scaler.
    context.scaler = plan_.fp32_chunk[chunk.key] ? 0.0f : scalers[chunk.key];
    absl::StatusOr<kernels::Payload> payload =
        codecs_.For(chunk.key).Encode(params_.ChunkGradients(chunk), context);
    if (!payload.ok()) {
      return AtStep(
          step, absl::Status(payload.status().code(),
                             absl::StrCat("encoding chunk ", chunk.key, ": ",
                                          payload.status().message())));
    }
    tern::v1::ChunkPayload* wire = push.add_chunks();
    wire->set_chunk_key(chunk.key);
    core::PayloadToWire(*std::move(payload), wire->mutable_payload());
    rec->push_bytes += core::PayloadBytes(wire->payload());
  }
  rec->push_msg_bytes += push.ByteSizeLong();
  return push;
}

absl::Status LpsProtocol::LoadWeights(const PsClient& client, uint64_t step,
                                      const PushPullResponse& pull,
                                      StepRecord* rec) {
  const std::vector<Chunk>& chunks = plan_.partition.chunks();
  rec->pull_msg_bytes += pull.ByteSizeLong();
  const auto lps_error = [&](const std::string& what) {
    return absl::InternalError(
        absl::StrCat("step ", step, ": LPS (", client.name(0), "): ", what));
  };
  if (pull.step() != step) {
    return lps_error(absl::StrCat("answered for step ", pull.step()));
  }
  if (static_cast<size_t>(pull.chunks_size()) != chunks.size()) {
    return lps_error(absl::StrCat("answered with ", pull.chunks_size(),
                                  " chunks, expected ", chunks.size()));
  }
  for (int i = 0; i < pull.chunks_size(); ++i) {
    const tern::v1::ChunkPayload& wire = pull.chunks(i);
    const uint32_t key = wire.chunk_key();
    if (key != static_cast<uint32_t>(i)) {
      return lps_error(absl::StrCat("chunk ", key, " where chunk ", i,
                                    " belongs (key order, each once)"));
    }
    rec->pull_bytes += core::PayloadBytes(wire.payload());
    if (absl::Status decoded = DecodeWeights(key, wire.payload());
        !decoded.ok()) {
      return absl::Status(
          decoded.code(),
          absl::StrCat("step ", step, ": LPS (", client.name(0), "): chunk ",
                       key, " of '", params_.names()[chunks[key].tensor],
                       "': ", decoded.message()));
    }
  }
  for (const float w : weights_) {
    if (!std::isfinite(w)) {
      return lps_error("the weights hold a non-finite value");
    }
  }
  params_.ScatterParameters(weights_);
  if (pull.param_checksum() != 0) lps_checksum_ = pull.param_checksum();
  return absl::OkStatus();
}

absl::Status LpsProtocol::DecodeWeights(uint32_t key,
                                        const tern::v1::Payload& wire) {
  TERN_ASSIGN_OR_RETURN(const kernels::Payload payload,
                        core::PayloadFromWire(wire));
  const auto codec = weight_codecs_.find(payload.codec);
  if (codec == weight_codecs_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights in ", kernels::CodecName(payload.codec),
                     " (expected terngrad, int8 or fp32)"));
  }
  const Chunk& chunk = plan_.partition.chunks()[key];
  return codec->second->Decode(
      payload,
      absl::MakeSpan(weights_).subspan(chunk.flat_offset, chunk.num_elements));
}

absl::Status LpsProtocol::CheckFinal(uint64_t step, uint64_t checksum) const {
  if (checksum == lps_checksum_) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "step ", step, ": the final weights from the LPS have checksum ",
      FormatChecksum(checksum), ", but the LPS reports ",
      FormatChecksum(lps_checksum_)));
}

}  // namespace tern::worker

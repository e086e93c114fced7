// --overlap: TernGradProtocol's steps 1 to 5 per shard, each shard on a
// thread of its own, started by the gradient hooks as backward completes
// the shard's tensors (worker/terngrad_protocol.h says why the bytes are
// those of the sequential step).
//
// Times in the step's record: compute_s is forward and backward, with the
// shards' threads running beside it; network_s is how long the step waited
// after backward for the last shard (the communication backward did not
// hide); encode_s and decode_s sum the shards' own encoding and decoding
// (plus the optimizer), much of it done during backward. So with --overlap
// the four do not add up to the step; wall_s tells the step's length.
#include <utility>

#include "common/status_macros.h"
#include "worker/local_scalers.h"
#include "worker/scaler_sharing.h"
#include "worker/terngrad_protocol.h"

namespace tern::worker {

using tern::v1::PushPullResponse;

TernGradProtocol::~TernGradProtocol() {
  if (readiness_ == nullptr) return;
  params_.RemoveGradientHooks();
  JoinFlights();
}

void TernGradProtocol::BeforeBackward(PsClient& client, uint64_t step) {
  if (readiness_ == nullptr) return;
  JoinFlights();  // a step that ended early may have left some running
  absl::MutexLock lock(&overlap_mu_);
  client_ = &client;
  step_ = step;
  for (ShardFlight& flight : flights_) {
    flight.status = absl::OkStatus();
    flight.record = StepRecord();
  }
  armed_ = true;
  Launch(readiness_->Reset());
}

void TernGradProtocol::OnGradient(uint32_t tensor,
                                  const torch::Tensor& gradient) {
  absl::MutexLock lock(&overlap_mu_);
  if (!armed_) return;  // a backward outside a step
  // The hook sees the gradient before it is accumulated into grad(), which
  // zero_grad() left empty: the value is the one grad() would hold.
  params_.GatherTensorGradient(tensor, gradient);
  Launch(readiness_->TensorReady(tensor));
}

void TernGradProtocol::Launch(const std::vector<uint32_t>& shards) {
  for (const uint32_t shard : shards) {
    ShardFlight& flight = flights_[shard];
    flight.thread = std::thread([this, shard, &flight] {
      flight.status = RunShard(shard, &flight.record);
    });
  }
}

void TernGradProtocol::JoinFlights() {
  for (ShardFlight& flight : flights_) {
    if (flight.thread.joinable()) flight.thread.join();
  }
}

absl::Status TernGradProtocol::RunShard(uint32_t shard, StepRecord* rec) {
  PsClient& client = *client_;
  const uint64_t step = step_;
  const std::vector<uint32_t>& keys = plan_.shard_chunks[shard];
  absl::Time phase = absl::Now();
  std::vector<Chunk> chunks;
  for (const uint32_t key : keys)
    chunks.push_back(plan_.partition.chunks()[key]);
  TERN_ASSIGN_OR_RETURN(
      const std::vector<float> local,
      LocalScalers(step, chunks, params_.gradients(), params_.names(),
                   static_cast<float>(options_.clip)));
  for (const uint32_t key : keys)
    scalers_[key] = local_scalers_[key] = local[key];
  rec->encode_s += SecondsSince(phase);

  if (share_scalers_) {
    phase = absl::Now();
    TERN_RETURN_IF_ERROR(ShareScalersWith(client, plan_, options_.worker_id,
                                          step, {shard}, &scalers_, rec));
    rec->network_s += SecondsSince(phase);
  }

  phase = absl::Now();
  Pushes pushes(1);
  pushes[0].shard = shard;
  TERN_ASSIGN_OR_RETURN(pushes[0].request,
                        EncodeShardPush(step, shard, scalers_, local_scalers_,
                                        /*threshold=*/0.0f,
                                        /*device_payloads=*/nullptr, rec));
  rec->encode_s += SecondsSince(phase);

  TERN_ASSIGN_OR_RETURN(std::vector<PushPullResponse> pulls,
                        Exchange(client, step, std::move(pushes), rec));

  phase = absl::Now();
  TERN_RETURN_IF_ERROR(
      DecodeShardPull(client, step, shard, std::move(pulls[0]), rec));
  rec->decode_s += SecondsSince(phase);
  return absl::OkStatus();
}

absl::Status TernGradProtocol::FinishOverlapped(uint64_t step,
                                                StepRecord* rec) {
  const absl::Time start = absl::Now();
  {
    absl::MutexLock lock(&overlap_mu_);
    if (!armed_ || step != step_) {
      return absl::InternalError(absl::StrCat(
          "step ", step, ": --overlap needs BeforeBackward of the step"));
    }
    armed_ = false;
    // Parameters backward gave no gradient (unused in the forward pass)
    // push zeros, as GatherGradients would.
    for (uint32_t t = 0; t < params_.names().size(); ++t) {
      if (readiness_->tensor_ready(t)) continue;
      params_.GatherTensorGradient(t);
      Launch(readiness_->TensorReady(t));
    }
  }
  JoinFlights();
  rec->network_s += SecondsSince(start);
  absl::Status status;
  for (const ShardFlight& flight : flights_) {
    if (status.ok()) status = flight.status;
    rec->push_bytes += flight.record.push_bytes;
    rec->pull_bytes += flight.record.pull_bytes;
    rec->push_msg_bytes += flight.record.push_msg_bytes;
    rec->pull_msg_bytes += flight.record.pull_msg_bytes;
    rec->encode_s += flight.record.encode_s;
    rec->decode_s += flight.record.decode_s;
  }
  if (!status.ok()) return status;
  const absl::Time optimizer = absl::Now();
  StepOptimizer(rec->lr);
  rec->decode_s += SecondsSince(optimizer);
  return absl::OkStatus();
}

}  // namespace tern::worker

// The step of --mode=weightgrad|gaia (DESIGN section 4; server/
// WEIGHTGRAD.md): the one shard is the data center's local parameter
// server (LPS), which holds the weights and runs the optimizer. Worker 0
// sends the initial weights at join, with the optimizer settings in the
// RunConfig. Per step: the NaN check; each chunk encoded (weightgrad:
// TernGrad with this worker's own scaler s_ik, no scaler sharing; gaia and
// fp32 chunks: fp32) and pushed; the answer's weights (ternary, int8 or
// fp32) decoded and loaded into the model; no local optimizer step.
//
// Replicas differ by design (each draws its own stochastic weights), so
// there is no CheckParams: the answer to the last step is the LPS's final
// model in fp32 with its checksum, which CheckFinal compares with the
// loaded weights.
//
// A restarted LPS (tern ps --state_dir) resumes from its last state, which
// may be some steps behind this worker, and refuses the worker's next push
// with OUT_OF_RANGE until it rejoins. Recover then joins again with the
// worker's first request (without worker 0's initial weights: the LPS
// keeps its restored ones), loads the LPS's current weights from the answer
// (fp32, checked against its checksum, as LoadStart loads worker 0's
// start) and returns the answer's next step, from which the Trainer trains
// on: steps the LPS lost are done again.
#ifndef TERN_WORKER_LPS_PROTOCOL_H_
#define TERN_WORKER_LPS_PROTOCOL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "kernels/codec.h"
#include "kernels/payload.h"
#include "worker/chunk_plan.h"
#include "worker/codec_set.h"
#include "worker/param_buffer.h"
#include "worker/step_protocol.h"
#include "worker/worker_options.h"

namespace tern::worker {

class LpsProtocol : public StepProtocol {
 public:
  // Borrows its arguments, which must outlive it (`logger` is shared).
  // INVALID_ARGUMENT when the kernels refuse a weight codec.
  static absl::StatusOr<std::unique_ptr<LpsProtocol>> Create(
      const WorkerOptions& options, ParamBuffer& params, const ChunkPlan& plan,
      const CodecSet& codecs, Logger logger);

  void AddToJoin(tern::v1::JoinRequest* request) const override;
  absl::Status Step(PsClient& client, uint64_t step,
                    StepRecord* record) override;
  // Recovers from OUT_OF_RANGE, a restarted LPS's refusal: rejoins, loads
  // the LPS's weights and logs one warning. FAILED_PRECONDITION when the
  // LPS's next step is past step + 1 (it holds steps this worker never
  // pushed), naming both; the errors of LoadStart when its weights do not
  // load or disagree with its checksum.
  absl::StatusOr<uint64_t> Recover(
      PsClient& client, uint64_t step, const absl::Status& failed,
      const tern::v1::JoinRequest& first_join) override;
  bool ReplicasIdentical() const override { return false; }
  absl::Status CheckFinal(uint64_t step, uint64_t checksum) const override;

 private:
  LpsProtocol(const WorkerOptions& options, ParamBuffer& params,
              const ChunkPlan& plan, const CodecSet& codecs, Logger logger);

  // This worker's push of `step`: every chunk, encoded.
  absl::StatusOr<tern::v1::PushPullRequest> EncodePush(uint64_t step,
                                                       StepRecord* record);
  // Loads the weights of the LPS's answer into the model.
  absl::Status LoadWeights(const PsClient& client, uint64_t step,
                           const tern::v1::PushPullResponse& pull,
                           StepRecord* record);
  // Chunk `key` of an answer into weights_.
  absl::Status DecodeWeights(uint32_t key, const tern::v1::Payload& wire);
  // The restarted LPS's answer to the rejoin after step `step` failed:
  // loads its weights and returns its next step.
  absl::StatusOr<uint64_t> LoadRejoin(
      const PsClient& client, uint64_t step,
      const std::vector<tern::v1::JoinResponse>& responses);

  const WorkerOptions& options_;
  ParamBuffer& params_;
  const ChunkPlan& plan_;
  const CodecSet& codecs_;
  Logger logger_;
  // Decoders of the LPS's weights, by codec (server/lps_state.h).
  std::map<kernels::CodecId, std::unique_ptr<kernels::Codec>> weight_codecs_;
  // The weights the LPS answered with, flat.
  std::vector<float> weights_;
  // The LPS's checksum from the answer to the last step.
  uint64_t lps_checksum_ = 0;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_LPS_PROTOCOL_H_

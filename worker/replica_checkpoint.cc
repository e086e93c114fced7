#include "worker/replica_checkpoint.h"

#include <cstring>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "kernels/payload.h"
#include "torch/serialize/archive.h"

namespace tern::worker {
namespace {

CheckpointIdentity IdentityOf(const WorkerOptions& options,
                              const ParamBuffer& params) {
  CheckpointIdentity identity;
  identity.run_id = options.run_id;
  identity.worker_id = options.worker_id;
  identity.num_workers = options.num_workers;
  // The file keeps the codec's --codec name.
  identity.codec = kernels::CodecName(options.codec);
  identity.param_spec_hash = params.spec_hash();
  identity.num_params = params.total_elements();
  identity.steps = options.steps;
  return identity;
}

}  // namespace

ReplicaCheckpointer::ReplicaCheckpointer(const WorkerOptions& options,
                                         const ParamBuffer& params,
                                         Logger logger)
    : path_(options.checkpoint_dir.empty()
                ? std::string()
                : CheckpointPath(options.checkpoint_dir, options.worker_id)),
      identity_(IdentityOf(options, params)),
      logger_(std::move(logger)) {}

absl::StatusOr<uint64_t> ReplicaCheckpointer::Restore(
    const ReplicaState& state) const {
  if (path_.empty()) return 0;
  absl::StatusOr<tern::v1::WorkerCheckpoint> checkpoint = ReadCheckpoint(path_);
  if (absl::IsNotFound(checkpoint.status())) {
    logger_->info("no checkpoint at {}: starting at step 0", path_);
    return 0;
  }
  if (!checkpoint.ok()) return checkpoint.status();
  TERN_RETURN_IF_ERROR(CheckCheckpointIdentity(*checkpoint, identity_, path_));
  TERN_RETURN_IF_ERROR(Apply(*checkpoint, state));
  logger_->info(
      "restored checkpoint {}: resuming at step {} of {}, checksum {}", path_,
      checkpoint->next_step(), identity_.steps,
      FormatChecksum(checkpoint->param_checksum()));
  return checkpoint->next_step();
}

absl::Status ReplicaCheckpointer::Apply(
    const tern::v1::WorkerCheckpoint& checkpoint,
    const ReplicaState& state) const {
  auto data_loss = [&](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", path_, "': ", what));
  };
  ParamBuffer& params = state.params;
  std::vector<float> flat(params.total_elements());
  std::memcpy(flat.data(), checkpoint.params().data(),
              checkpoint.params().size());
  params.ScatterParameters(flat);
  if (params.Checksum() != checkpoint.param_checksum()) {
    return data_loss(absl::StrCat(
        "the parameters have checksum ", FormatChecksum(params.Checksum()),
        ", but the checkpoint records ",
        FormatChecksum(checkpoint.param_checksum()), " (a corrupt file)"));
  }
  try {
    torch::serialize::InputArchive archive;
    std::istringstream in(checkpoint.optimizer_state());
    archive.load_from(in);
    state.optimizer.load(archive);
  } catch (const c10::Error& e) {
    return data_loss(absl::StrCat("the optimizer state does not load: ",
                                  e.what_without_backtrace()));
  }
  if (state.feedback != nullptr) {
    if (absl::Status restored =
            state.feedback->RestoreState(checkpoint.residual_state());
        !restored.ok()) {
      return data_loss(
          absl::StrCat("the error-feedback residuals: ", restored.message()));
    }
  } else if (!checkpoint.residual_state().empty()) {
    return data_loss("it holds residuals, but the codec has no error feedback");
  }
  state.batches.Seek(checkpoint.data_position());
  return absl::OkStatus();
}

absl::Status ReplicaCheckpointer::Save(const ReplicaState& state,
                                       uint64_t next_step) const {
  const absl::Time start = absl::Now();
  tern::v1::WorkerCheckpoint checkpoint;
  checkpoint.set_format_version(kCheckpointFormatVersion);
  checkpoint.set_run_id(identity_.run_id);
  checkpoint.set_worker_id(identity_.worker_id);
  checkpoint.set_num_workers(identity_.num_workers);
  checkpoint.set_codec(identity_.codec);
  checkpoint.set_param_spec_hash(identity_.param_spec_hash);
  checkpoint.set_steps(identity_.steps);
  checkpoint.set_next_step(next_step);
  checkpoint.set_data_position(state.batches.position());
  std::vector<float> flat(state.params.total_elements());
  state.params.GatherParameters(absl::MakeSpan(flat));
  checkpoint.set_params(std::string(reinterpret_cast<const char*>(flat.data()),
                                    flat.size() * sizeof(float)));
  checkpoint.set_param_checksum(state.params.Checksum());
  {
    torch::serialize::OutputArchive archive;
    state.optimizer.save(archive);
    std::ostringstream out;
    archive.save_to(out);
    checkpoint.set_optimizer_state(std::move(out).str());
  }
  if (state.feedback != nullptr) {
    checkpoint.set_residual_state(state.feedback->SaveState());
  }
  TERN_RETURN_IF_ERROR(WriteCheckpoint(path_, checkpoint));
  logger_->info("checkpoint for step {} written to {} ({:.1f} MiB, {:.2f} s)",
                next_step, path_, checkpoint.ByteSizeLong() / double(1 << 20),
                absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

}  // namespace tern::worker

#include "worker/codec_set.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/codec_registry.h"
#include "kernels/sparse_select.h"
#include "worker/codec_config.h"

namespace tern::worker {

kernels::CodecOptions Fp32CodecOptions() {
  kernels::CodecOptions options;
  options.id = kernels::CodecId::kFp32;
  options.push_layout = kernels::Layout::kRaw;
  options.pull_layout = kernels::Layout::kRaw;
  return options;
}

absl::StatusOr<kernels::CodecOptions> CodecSet::PushOptions(
    const WorkerOptions& options) {
  // The flags' CodecOptions, the same the shards build from the join, and
  // validated even where gaia replaces them.
  TERN_ASSIGN_OR_RETURN(kernels::CodecOptions run,
                        MakeRunCodecOptions(options));
  // gaia: the workers push fp32 gradients.
  if (options.mode == TrainMode::kGaia) return Fp32CodecOptions();
  return run;
}

absl::StatusOr<CodecSet> CodecSet::Create(const kernels::CodecOptions& options,
                                          const ChunkPlan& plan,
                                          const tern::v1::ParamSpec& spec) {
  CodecSet set;
  set.options_ = options;
  set.fp32_chunk_ = plan.fp32_chunk;
  TERN_ASSIGN_OR_RETURN(set.run_, kernels::MakeCodec(options));
  TERN_ASSIGN_OR_RETURN(set.fp32_, kernels::MakeCodec(Fp32CodecOptions()));
  // Column-wise codecs (onebit, adaptive) group each chunk by rows of its
  // tensor, as the shards do.
  for (const Chunk& chunk : plan.partition.chunks()) {
    const auto& shape = spec.tensors(chunk.tensor).shape();
    set.group_sizes_.push_back(kernels::ColumnGroupSize(
        absl::MakeConstSpan(shape.data(), shape.size())));
  }
  // Error feedback wraps the run codec; fp32 chunks lose nothing and keep
  // no residual.
  if (set.run_->UsesErrorFeedback()) {
    set.feedback_ =
        std::make_unique<kernels::ErrorFeedback>(std::move(set.run_));
    for (const Chunk& chunk : plan.partition.chunks()) {
      if (plan.fp32_chunk[chunk.key]) continue;
      TERN_RETURN_IF_ERROR(
          set.feedback_->Register(chunk.key, chunk.num_elements));
    }
  }
  return set;
}

const kernels::Codec& CodecSet::run() const {
  return feedback_ != nullptr ? feedback_->codec() : *run_;
}

const kernels::Codec& CodecSet::For(uint32_t key) const {
  return fp32_chunk_[key] ? *fp32_ : run();
}

absl::StatusOr<float> CodecSet::Compensate(absl::Span<const Chunk> chunks,
                                           absl::Span<float> gradients,
                                           absl::Span<const std::string> names,
                                           const RandomStream& stream) {
  std::vector<absl::Span<const float>> compensated;
  for (const Chunk& chunk : chunks) {
    if (fp32_chunk_[chunk.key]) continue;
    const absl::Span<float> values =
        gradients.subspan(chunk.flat_offset, chunk.num_elements);
    if (absl::Status status = feedback_->Compensate(chunk.key, values);
        !status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("compensating chunk ", chunk.key, " of '",
                       names[chunk.tensor], "': ", status.message()));
    }
    compensated.push_back(values);
  }
  if (options_.id != kernels::CodecId::kDropping ||
      options_.drop_scope != kernels::DropScope::kGlobal) {
    return 0.0f;
  }
  // Aji & Heafield select one threshold over the whole gradient: the worker
  // draws it from all compensated chunks at once.
  return kernels::SampledMagnitudeThreshold(compensated, options_.drop_ratio,
                                            options_.sample_size, stream);
}

absl::StatusOr<kernels::Payload> CodecSet::Encode(
    uint32_t key, absl::Span<const float> values,
    const kernels::EncodeContext& context) {
  if (!fp32_chunk_[key] && feedback_ != nullptr) {
    return feedback_->EncodeCompensated(key, values, context);
  }
  return For(key).Encode(values, context);
}

}  // namespace tern::worker

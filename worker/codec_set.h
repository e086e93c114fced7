// The codecs one worker encodes its pushes and decodes its pulls with
// (DESIGN section 6): the run's codec (wrapped in error feedback when the
// codec keeps residuals: kernels/error_feedback.h), fp32 for the chunks
// that stay in full precision (ChunkPlan::fp32_chunk), and each chunk's
// column group size (kernels::ColumnGroupSize, as the shards compute it).
//
// Ownership and threads: a CodecSet owns its codecs and the residuals. It
// is not thread-safe (the residuals change every step); one training loop
// uses it. The error feedback's state is part of the worker's checkpoint.
#ifndef TERN_WORKER_CODEC_SET_H_
#define TERN_WORKER_CODEC_SET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/partitioner.h"
#include "common/philox.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/error_feedback.h"
#include "tern/v1/payload.pb.h"
#include "worker/chunk_plan.h"
#include "worker/worker_options.h"

namespace tern::worker {

class CodecSet {
 public:
  // The options of the codec the run pushes gradients with: the flags'
  // (MakeRunCodecOptions), and fp32 under --mode=gaia. INVALID_ARGUMENT
  // naming the flag for a value out of range.
  static absl::StatusOr<kernels::CodecOptions> PushOptions(
      const WorkerOptions& options);

  // The codecs of `options` for the chunks of `plan`, of the model `spec`
  // describes. INVALID_ARGUMENT when the kernels refuse the options.
  static absl::StatusOr<CodecSet> Create(const kernels::CodecOptions& options,
                                         const ChunkPlan& plan,
                                         const tern::v1::ParamSpec& spec);

  CodecSet(CodecSet&&) = default;
  CodecSet& operator=(CodecSet&&) = default;

  const kernels::CodecOptions& options() const { return options_; }
  // The run's codec (the one error feedback wraps, if it does).
  const kernels::Codec& run() const;
  const kernels::Codec& fp32() const { return *fp32_; }
  // The codec of chunk `key`: fp32 for the plan's fp32 chunks, else run().
  const kernels::Codec& For(uint32_t key) const;
  // The error feedback; null when the run's codec keeps no residuals.
  kernels::ErrorFeedback* feedback() { return feedback_.get(); }
  const kernels::ErrorFeedback* feedback() const { return feedback_.get(); }
  // EncodeContext::group_size of chunk `key`.
  uint64_t group_size(uint32_t key) const { return group_sizes_[key]; }

  // Error feedback: adds each compressed chunk's residual to its part of
  // `gradients` (the flat buffer) in place, and returns dropping's global
  // threshold over all compensated chunks (0: each chunk selects its own),
  // drawn with `stream` (whose chunk is kGlobalThresholdChunk). `names`
  // name the tensors in errors. Needs feedback().
  absl::StatusOr<float> Compensate(absl::Span<const Chunk> chunks,
                                   absl::Span<float> gradients,
                                   absl::Span<const std::string> names,
                                   const RandomStream& stream);

  // Chunk `key`'s push from its values (already compensated for a chunk
  // with error feedback, which then keeps what the payload drops).
  absl::StatusOr<kernels::Payload> Encode(
      uint32_t key, absl::Span<const float> values,
      const kernels::EncodeContext& context);

 private:
  CodecSet() = default;

  kernels::CodecOptions options_;
  // The run's codec; null when feedback_ owns it.
  std::unique_ptr<kernels::Codec> run_;
  std::unique_ptr<kernels::ErrorFeedback> feedback_;
  std::unique_ptr<kernels::Codec> fp32_;
  // By chunk key.
  std::vector<uint64_t> group_sizes_;
  std::vector<bool> fp32_chunk_;
};

// The options of the fp32 codec (raw layouts).
kernels::CodecOptions Fp32CodecOptions();

// The `chunk` of the stream dropping's global threshold is drawn with
// (kernels/sparse_select.h): no chunk has this key.
inline constexpr uint32_t kGlobalThresholdChunk = 0xFFFFFFFFu;

}  // namespace tern::worker

#endif  // TERN_WORKER_CODEC_SET_H_

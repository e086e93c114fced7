// The run's codec as the worker's flags configure it (DESIGN section 6), and
// how the join describes it to the shards (RunConfig: codec, layouts, clip,
// codec_params), so that a shard re-encodes pulls exactly as the workers
// encode pushes.
#ifndef TERN_WORKER_CODEC_CONFIG_H_
#define TERN_WORKER_CODEC_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/codec_options.h"
#include "kernels/payload.h"
#include "tern/v1/parameter_server.pb.h"
#include "worker/worker_options.h"

namespace tern::worker {

// The most QSGD levels --qsgd_levels takes (a level fits 8 bits; the shards
// refuse more).
inline constexpr uint32_t kMaxQsgdLevels = 127;

// The codec --codec names: every gradient codec the kernels know (as
// kernels::ParseCodecName reads it), not int8, which is WeightGrad's weight
// codec. INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<kernels::CodecId> ParseGradientCodec(absl::string_view name);
// "fp32, fp16, terngrad, onebit, ...": the names ParseGradientCodec takes.
std::string GradientCodecNames();
// Whether --codec may name `id` (what ParseGradientCodec can return).
bool IsGradientCodec(kernels::CodecId id);

// The options of the run's codec from the flags: --codec (INVALID_ARGUMENT
// when it is not IsGradientCodec), --clip and the
// compressors' flags (--tau ... --sampled_means). The layouts are set only
// where they are a choice (TernGrad: --packing, --sum_packing) or fixed (RAW
// for fp32 and fp16); the compressors write the one layout their options
// choose and get kUnspecified (the join still names it: LayoutsOf).
// INVALID_ARGUMENT naming the flag for a value out of range.
absl::StatusOr<kernels::CodecOptions> MakeRunCodecOptions(
    const WorkerOptions& options);

// The layouts a run's pushes and pulls have (RunConfig.push_layout and
// pull_layout; proto/tern/v1/payload.proto documents them): the options'
// own where set, else the one the codec writes: SIGN_BITS for onebit,
// INDEX_SIGN for threshold, adaptive and dropping with
// --drop_survivors=1bit, INDEX_2BIT for dropping with --drop_survivors=2bit,
// INDEX_VALUE for dropping, QSGD_LEVELS for qsgd. Pulls have the pushes'
// layout, except for TernGrad (sums).
struct RunLayouts {
  kernels::Layout push = kernels::Layout::kUnspecified;
  kernels::Layout pull = kernels::Layout::kUnspecified;
};
RunLayouts LayoutsOf(const kernels::CodecOptions& options);

// Fills `config`'s codec, layouts, clip and codec_params from `options`.
void CodecToRunConfig(const kernels::CodecOptions& options,
                      tern::v1::RunConfig* config);

}  // namespace tern::worker

#endif  // TERN_WORKER_CODEC_CONFIG_H_

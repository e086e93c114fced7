#include "worker/codec_config.h"

#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/codec_registry.h"
#include "kernels/terngrad_codec.h"

namespace tern::worker {
namespace {

// Gradient codecs in the order --help lists them.
constexpr kernels::CodecId kGradientCodecs[] = {
    kernels::CodecId::kTernGrad,  kernels::CodecId::kFp32,
    kernels::CodecId::kFp16,      kernels::CodecId::kOneBit,
    kernels::CodecId::kThreshold, kernels::CodecId::kAdaptive,
    kernels::CodecId::kDropping,  kernels::CodecId::kQsgd,
};

absl::Status OutOfRange(absl::string_view flag, double value,
                        absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " is not ", range));
}

// In the open interval (0, 1), finite.
bool IsFraction(float value) { return value > 0 && value < 1; }

// --sum_packing's layout (the flag is checked before).
kernels::Layout PullLayoutOf(absl::string_view sum_packing) {
  if (sum_packing == "radix") return kernels::Layout::kSumRadix;
  if (sum_packing == "huffman") return kernels::Layout::kSumHuffman;
  return kernels::Layout::kSumBits;
}

}  // namespace

bool IsGradientCodec(kernels::CodecId id) {
  for (const kernels::CodecId gradient : kGradientCodecs) {
    if (id == gradient) return true;
  }
  return false;
}

absl::StatusOr<kernels::CodecId> ParseGradientCodec(absl::string_view name) {
  absl::StatusOr<kernels::CodecId> id = kernels::ParseCodecName(name);
  if (id.ok() && IsGradientCodec(*id)) return id;
  return absl::InvalidArgumentError(
      absl::StrCat("--codec: '", name,
                   "' is not a gradient codec; known: ", GradientCodecNames()));
}

std::string GradientCodecNames() {
  std::vector<std::string> names;
  for (const kernels::CodecId id : kGradientCodecs) {
    names.push_back(kernels::CodecName(id));
  }
  return absl::StrJoin(names, ", ");
}

namespace {

// --drop_survivors: the survivors whose DropSurvivorsName is `name`.
std::optional<kernels::DropSurvivors> ParseDropSurvivors(
    absl::string_view name) {
  for (const kernels::DropSurvivors survivors :
       {kernels::DropSurvivors::kValues, kernels::DropSurvivors::k1Bit,
        kernels::DropSurvivors::k2Bit}) {
    if (name == kernels::DropSurvivorsName(survivors)) return survivors;
  }
  return std::nullopt;
}

// The codec flags' values, each on its own: INVALID_ARGUMENT or
// OUT_OF_RANGE naming the first flag that will not do.
absl::Status CheckCodecFlags(const WorkerOptions& o) {
  if (!IsGradientCodec(o.codec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--codec: ", kernels::CodecName(o.codec),
        " is not a gradient codec; known: ", GradientCodecNames()));
  }
  if (!(o.clip >= 0) || !std::isfinite(o.clip)) {
    return OutOfRange("clip", o.clip, "a finite number >= 0");
  }
  if (!(o.tau > 0) || !std::isfinite(o.tau)) {
    return OutOfRange("tau", o.tau, "a finite number > 0");
  }
  if (!IsFraction(o.proportion)) {
    return OutOfRange("proportion", o.proportion, "in (0, 1)");
  }
  if (!IsFraction(o.drop_ratio)) {
    return OutOfRange("drop_ratio", o.drop_ratio, "in (0, 1)");
  }
  if (o.drop_scope != "global" && o.drop_scope != "tensor") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--drop_scope: '", o.drop_scope, "' is not global or tensor"));
  }
  if (!ParseDropSurvivors(o.drop_survivors).has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drop_survivors: '", o.drop_survivors,
                     "' is not values, 1bit or 2bit"));
  }
  if (o.clip_rule != "worker" && o.clip_rule != "shared") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--clip_rule: '", o.clip_rule, "' is not worker or shared"));
  }
  if (o.qsgd_levels < 1 || o.qsgd_levels > kMaxQsgdLevels) {
    return OutOfRange("qsgd_levels", o.qsgd_levels,
                      absl::StrCat("in [1, ", kMaxQsgdLevels, "]"));
  }
  if (o.qsgd_bucket < 1) return OutOfRange("qsgd_bucket", 0, ">= 1");
  if (o.sample_size < 1) return OutOfRange("sample_size", 0, ">= 1");
  if (o.packing != "2bit" && o.packing != "base3") {
    return absl::InvalidArgumentError(
        absl::StrCat("--packing: '", o.packing, "' is not 2bit or base3"));
  }
  if (o.sum_packing != "bits" && o.sum_packing != "radix" &&
      o.sum_packing != "huffman") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sum_packing: '", o.sum_packing, "' is not bits, radix or huffman"));
  }

  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<kernels::CodecOptions> MakeRunCodecOptions(
    const WorkerOptions& o) {
  if (absl::Status status = CheckCodecFlags(o); !status.ok()) return status;
  kernels::CodecOptions options;
  options.id = o.codec;
  options.clip = static_cast<float>(o.clip);
  options.clip_rule = o.clip_rule == "shared" ? kernels::ClipRule::kShared
                                              : kernels::ClipRule::kWorker;
  switch (o.codec) {
    case kernels::CodecId::kTernGrad:
      // TernGrad pushes ternaries (2 bits, or base 3 at 1.6 bits) and pulls
      // sums of N ternaries (ceil(log2(2N+1)) bits, radix 2N+1 in 64-bit
      // words, or Huffman-coded): DESIGN section 5.
      options.push_layout = o.packing == "base3"
                                ? kernels::Layout::kTernaryBase3
                                : kernels::Layout::kTernary2Bit;
      options.pull_layout = PullLayoutOf(o.sum_packing);
      break;
    case kernels::CodecId::kFp32:
    case kernels::CodecId::kFp16:
      options.push_layout = options.pull_layout = kernels::Layout::kRaw;
      break;
    default:
      break;  // the compressor's one layout
  }
  options.sample_size = o.sample_size;
  options.sampled_means = o.sampled_means;
  options.tau = o.tau;
  options.proportion = o.proportion;
  options.drop_ratio = o.drop_ratio;
  options.drop_scope = o.drop_scope == "tensor" ? kernels::DropScope::kPerTensor
                                                : kernels::DropScope::kGlobal;
  // Checked above.
  options.drop_survivors = *ParseDropSurvivors(o.drop_survivors);
  options.qsgd_levels = o.qsgd_levels;
  options.qsgd_bucket = o.qsgd_bucket;
  return options;
}

RunLayouts LayoutsOf(const kernels::CodecOptions& options) {
  using kernels::Layout;
  Layout layout = Layout::kUnspecified;
  switch (options.id) {
    case kernels::CodecId::kTernGrad:
      return RunLayouts{options.push_layout != Layout::kUnspecified
                            ? options.push_layout
                            : kernels::TernGradOptions().push_layout,
                        options.pull_layout != Layout::kUnspecified
                            ? options.pull_layout
                            : kernels::TernGradOptions().pull_layout};
    case kernels::CodecId::kFp32:
    case kernels::CodecId::kFp16:
    case kernels::CodecId::kInt8:
      layout = Layout::kRaw;
      break;
    case kernels::CodecId::kOneBit:
      layout = Layout::kSignBits;
      break;
    case kernels::CodecId::kThreshold:
    case kernels::CodecId::kAdaptive:
      layout = Layout::kIndexSign;
      break;
    case kernels::CodecId::kDropping:
      switch (options.drop_survivors) {
        case kernels::DropSurvivors::kValues:
          layout = Layout::kIndexValue;
          break;
        case kernels::DropSurvivors::k1Bit:
          layout = Layout::kIndexSign;
          break;
        case kernels::DropSurvivors::k2Bit:
          layout = Layout::kIndex2Bit;
          break;
      }
      break;
    case kernels::CodecId::kQsgd:
      layout = Layout::kQsgdLevels;
      break;
    case kernels::CodecId::kUnspecified:
      break;
  }
  return RunLayouts{
      options.push_layout != Layout::kUnspecified ? options.push_layout
                                                  : layout,
      options.pull_layout != Layout::kUnspecified ? options.pull_layout
                                                  : layout};
}

void CodecToRunConfig(const kernels::CodecOptions& options,
                      tern::v1::RunConfig* config) {
  config->set_codec(static_cast<tern::v1::Codec>(options.id));
  const RunLayouts layouts = LayoutsOf(options);
  config->set_push_layout(static_cast<tern::v1::Layout>(layouts.push));
  config->set_pull_layout(static_cast<tern::v1::Layout>(layouts.pull));
  config->set_clip(options.clip);
  tern::v1::CodecParams* params = config->mutable_codec_params();
  params->set_sample_size(options.sample_size);
  params->set_sampled_means(options.sampled_means);
  params->set_tau(options.tau);
  params->set_proportion(options.proportion);
  params->set_drop_ratio(options.drop_ratio);
  params->set_drop_scope(static_cast<uint32_t>(options.drop_scope));
  params->set_drop_survivors(static_cast<uint32_t>(options.drop_survivors));
  params->set_qsgd_levels(options.qsgd_levels);
  params->set_qsgd_bucket(options.qsgd_bucket);
}

}  // namespace tern::worker

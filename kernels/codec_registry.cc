#include "kernels/codec_registry.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/adaptive_codec.h"
#include "kernels/dropping_codec.h"
#include "kernels/fp16_codec.h"
#include "kernels/fp32_codec.h"
#include "kernels/int8_codec.h"
#include "kernels/onebit_codec.h"
#include "kernels/qsgd_codec.h"
#include "kernels/terngrad_codec.h"
#include "kernels/threshold_codec.h"

namespace tern::kernels {
namespace {

constexpr CodecId kNamedCodecs[] = {
    CodecId::kFp32,     CodecId::kFp16,      CodecId::kTernGrad,
    CodecId::kOneBit,   CodecId::kThreshold, CodecId::kAdaptive,
    CodecId::kDropping, CodecId::kQsgd,      CodecId::kInt8,
};

// fp32 and fp16 have one layout; accept it named or left unspecified.
absl::Status CheckRawLayouts(const CodecOptions& options) {
  for (const Layout layout : {options.push_layout, options.pull_layout}) {
    if (layout != Layout::kUnspecified && layout != Layout::kRaw) {
      return absl::InvalidArgumentError(
          absl::StrFormat("codec %s has no layout %s", CodecName(options.id),
                          LayoutName(layout)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(const CodecOptions& options) {
  switch (options.id) {
    case CodecId::kFp32: {
      absl::Status status = CheckRawLayouts(options);
      if (!status.ok()) return status;
      return std::unique_ptr<Codec>(std::make_unique<Fp32Codec>());
    }
    case CodecId::kFp16: {
      absl::Status status = CheckRawLayouts(options);
      if (!status.ok()) return status;
      return std::unique_ptr<Codec>(std::make_unique<Fp16Codec>());
    }
    case CodecId::kTernGrad: {
      TernGradOptions terngrad;
      terngrad.clip = options.clip;
      terngrad.clip_rule = options.clip_rule;
      if (options.push_layout != Layout::kUnspecified) {
        terngrad.push_layout = options.push_layout;
      }
      if (options.pull_layout != Layout::kUnspecified) {
        terngrad.pull_layout = options.pull_layout;
      }
      absl::StatusOr<std::unique_ptr<TernGradCodec>> codec =
          TernGradCodec::Create(terngrad);
      if (!codec.ok()) return codec.status();
      return std::unique_ptr<Codec>(*std::move(codec));
    }
    case CodecId::kOneBit:
      return MakeOneBitCodec(options);
    case CodecId::kThreshold:
      return MakeThresholdCodec(options);
    case CodecId::kAdaptive:
      return MakeAdaptiveCodec(options);
    case CodecId::kDropping:
      return MakeDroppingCodec(options);
    case CodecId::kQsgd:
      return MakeQsgdCodec(options);
    case CodecId::kInt8: {
      absl::Status status = CheckRawLayouts(options);
      if (!status.ok()) return status;
      return std::unique_ptr<Codec>(std::make_unique<Int8Codec>());
    }
    case CodecId::kUnspecified:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("no codec with id %d", static_cast<int>(options.id)));
}

absl::StatusOr<CodecId> ParseCodecName(absl::string_view name) {
  for (const CodecId id : kNamedCodecs) {
    if (name == CodecName(id)) return id;
  }
  std::vector<std::string> names;
  for (const CodecId id : kNamedCodecs) names.push_back(CodecName(id));
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown codec \"%s\"; known: %s", name, absl::StrJoin(names, ", ")));
}

}  // namespace tern::kernels

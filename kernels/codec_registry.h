// Builds codecs by id, explicitly: no static registration (it silently
// drops codecs from static archives). Adding a codec means adding a case to
// MakeCodec. CodecName() and LayoutName() live in kernels/payload.h.
#ifndef TERN_KERNELS_CODEC_REGISTRY_H_
#define TERN_KERNELS_CODEC_REGISTRY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/payload.h"

namespace tern::kernels {

// INVALID_ARGUMENT for options the codec rejects (e.g. a layout it does not
// write) and for an id outside the enum.
absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(const CodecOptions& options);

// "fp32", "fp16", "terngrad", ... (every name CodecName() returns for a
// real codec) -> the id; INVALID_ARGUMENT for anything else.
absl::StatusOr<CodecId> ParseCodecName(absl::string_view name);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_CODEC_REGISTRY_H_

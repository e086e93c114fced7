#include "global/update_encoding.h"

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/limits.h"
#include "core/payload_validation.h"

namespace tern::global {
namespace {

using kernels::CodecId;
using kernels::Layout;

// The most bytes one chunk's payload of `elements` takes in `layout`.
uint64_t PayloadBytesBound(CodecId codec, Layout layout, uint64_t elements) {
  switch (layout) {
    case Layout::kTernary2Bit:
    case Layout::kTernaryBase3:
      return (elements + 3) / 4;  // base 3 packs 5 per byte: smaller
    default:
      return (codec == CodecId::kFp16 ? 2 : 4) * elements;
  }
}

}  // namespace

absl::StatusOr<Layout> UpdateLayout(CodecId codec, Layout requested) {
  auto refuse = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "update codec ", kernels::CodecName(codec), " with layout ",
        kernels::LayoutName(requested),
        " is not one the GS averages (fp32 or fp16 in RAW, terngrad in "
        "TERNARY_2BIT or TERNARY_BASE3)"));
  };
  switch (codec) {
    case CodecId::kFp32:
    case CodecId::kFp16:
      if (requested == Layout::kUnspecified) return Layout::kRaw;
      if (requested == Layout::kRaw) return requested;
      return refuse();
    case CodecId::kTernGrad:
      if (requested == Layout::kUnspecified) return Layout::kTernary2Bit;
      if (requested == Layout::kTernary2Bit ||
          requested == Layout::kTernaryBase3) {
        return requested;
      }
      return refuse();
    default:
      return refuse();
  }
}

bool AnswerFits(const std::vector<uint64_t>& chunk_elements,
                const std::vector<uint32_t>& fp32_chunk_keys, CodecId codec,
                Layout layout, uint64_t max_message_bytes) {
  uint64_t bytes = core::kMessageSlackBytes;
  size_t next_fp32 = 0;
  for (size_t key = 0; key < chunk_elements.size(); ++key) {
    const bool fp32 = next_fp32 < fp32_chunk_keys.size() &&
                      fp32_chunk_keys[next_fp32] == key;
    if (fp32) ++next_fp32;
    // Beyond the limit no message holds it; stop before the sum overflows.
    if (chunk_elements[key] > core::kMaxTensorElements) return false;
    bytes += PayloadBytesBound(fp32 ? CodecId::kFp32 : codec,
                               fp32 ? Layout::kRaw : layout,
                               chunk_elements[key]) +
             core::kChunkFramingBytes;
    if (bytes > max_message_bytes) return false;
  }
  return bytes <= max_message_bytes;
}

absl::StatusOr<DecodedUpdates> DecodeUpdates(
    const SyncRequest& request, const std::vector<const ChunkSpec*>& specs,
    const kernels::Codec* fp32) {
  DecodedUpdates decoded;
  decoded.chunks.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint32_t key = request.updates[i].chunk_key;
    const kernels::Payload& update = request.updates[i].payload;
    // An LPS's final synchronization sends every chunk exactly, in fp32
    // RAW, whatever the registered update codec (server/WEIGHTGRAD.md); the
    // chunk's average is then answered in fp32 too.
    ChunkSpec spec = *specs[i];
    if (update.codec == CodecId::kFp32 && update.layout == Layout::kRaw &&
        spec.codec != CodecId::kFp32) {
      spec.codec = CodecId::kFp32;
      spec.layout = Layout::kRaw;
      spec.kernel = fp32;
      decoded.exact.push_back(key);
    }
    core::PayloadExpectation expect;
    expect.codec = spec.codec;
    expect.layout = spec.layout;
    expect.num_elements = spec.num_elements;
    expect.reader = "the GS";
    expect.message = "an update";
    expect.sender = "data center";
    std::vector<float> values(spec.num_elements);
    absl::Status status = core::ValidatePayload(update, expect);
    if (status.ok()) {
      status = core::DecodeFinite(*spec.kernel, update, absl::MakeSpan(values));
    }
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("round ", request.round, ": chunk ", key,
                       " of data center ", request.datacenter, ": ",
                       status.message()));
    }
    decoded.bytes += update.data.size() + update.scalers.size() * sizeof(float);
    decoded.chunks.emplace_back(key, std::move(values));
  }
  return decoded;
}

}  // namespace tern::global

// Internal to kernels/: the two sparse layouts of proto/tern/v1/payload.proto
// shared by the threshold, adaptive and dropping codecs.
//
//   LAYOUT_INDEX_SIGN:  data = uint32 group_size, then one uint32 word
//                       (index << 1) | negative per nonzero element;
//                       scalers = (positive value, negative value) per group.
//   LAYOUT_INDEX_VALUE: data = (uint32 index, float32 value) pairs; no
//                       scalers.
//   LAYOUT_INDEX_2BIT:  data = one uint32 word (index << 2) | (large << 1)
//                       | negative per kept element; scalers = (small
//                       magnitude, large magnitude), 0 <= small <= large.
//
// Indices are strictly increasing and below 2^31 (2^30 for INDEX_2BIT); all
// words little-endian.
#ifndef TERN_KERNELS_INDEX_PACKING_H_
#define TERN_KERNELS_INDEX_PACKING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/codec_options.h"
#include "kernels/payload.h"

namespace tern::kernels {

// Chunks must have fewer elements than this: indices have 31 bits.
inline constexpr uint64_t kMaxSparseElements = uint64_t{1} << 31;

// INDEX_2BIT chunks must have fewer elements than this: indices have 30 bits.
inline constexpr uint64_t kMaxIndex2BitElements = uint64_t{1} << 30;

// ceil(num_elements / group_size) for group_size >= 1: 0 for no elements.
inline uint64_t NumGroups(uint64_t num_elements, uint64_t group_size) {
  return num_elements == 0 ? 0 : (num_elements - 1) / group_size + 1;
}

// The group_size an INDEX_SIGN encoder writes for EncodeContext::group_size
// `requested`: 0 (one group) and anything longer than the chunk become the
// chunk's length; never below 1, so that a header is valid for 0 elements.
inline uint32_t SparseGroupSize(uint64_t requested, uint64_t num_elements) {
  uint64_t size =
      requested == 0 || requested > num_elements ? num_elements : requested;
  return static_cast<uint32_t>(size < 1 ? 1 : size);
}

// One INDEX_SIGN word; index < 2^31.
inline uint32_t IndexSignWord(uint32_t index, bool negative) {
  return (index << 1) | (negative ? 1u : 0u);
}

// What every encoder checks first: fewer than kMaxSparseElements values, all
// finite. INVALID_ARGUMENT naming the codec and the first bad index.
absl::Status CheckSparseInput(absl::Span<const float> values, CodecId codec);

// Accepts push and pull layouts that are kUnspecified or `layout`, the one
// layout `codec` writes with these options.
absl::Status CheckSparseLayouts(const CodecOptions& options, CodecId codec,
                                Layout layout);

// Sets payload->data to an INDEX_SIGN body and payload->scalers to
// `scalers` (2 per group). The words must come from IndexSignWord with
// strictly increasing indices.
void PackIndexSign(uint32_t group_size, absl::Span<const uint32_t> words,
                   absl::Span<const float> scalers, Payload* payload);

// The INDEX_SIGN body and scalers of the values with v > 0 and v >=
// `positive_threshold`, or v < 0 and v <= `negative_threshold`, each group
// of `group_size` (>= 1) reconstructing them with the mean of its sent
// positive and the mean of its sent negative values (0 where it sends none):
// the column-wise means of Dryden et al. 2016, section 3.3.
void PackIndexSignMeans(absl::Span<const float> values,
                        float positive_threshold, float negative_threshold,
                        uint32_t group_size, Payload* payload);

// The INDEX_2BIT body and scalers of the values with |v| >= `threshold`
// (> 0; zeros are never sent): the 2-bit survivors of Aji & Heafield 2017
// (sections 5.4 and 6). A kept value is large when |v| >= the boundary
// halfway between `threshold` and the largest kept |v|, small otherwise;
// each bucket is sent as its mean |v| (0 when empty), the same for both
// signs, as the authors' implementation (marian-nmt's dropper, bits=2)
// does. values.size() < kMaxIndex2BitElements.
void PackIndex2Bit(absl::Span<const float> values, float threshold,
                   Payload* payload);

// Sets payload->data to INDEX_VALUE pairs and clears its scalers.
// indices.size() == values.size(), indices strictly increasing.
void PackIndexValue(absl::Span<const uint32_t> indices,
                    absl::Span<const float> values, Payload* payload);

// Validates a payload of `codec` in `layout` and writes the values it stands
// for into `out` (zero where it names no element). Checks the codec, the
// layout, the format version, num_elements == out.size(), num_summands >= 1
// (a pull holds the average already; nothing is divided), and then the
// body: INDEX_SIGN a group_size >= 1, 2 * groups scalers, each finite with
// positive values >= 0 and negative values <= 0, whole words; INDEX_VALUE
// whole pairs with finite values; INDEX_2BIT 2 finite scalers with 0 <=
// small <= large, whole words; all indices in range and strictly
// increasing. On error returns INVALID_ARGUMENT naming the problem and
// leaves `out` unchanged; never reads past the payload.
absl::Status DecodeSparsePayload(const Payload& payload, CodecId codec,
                                 Layout layout, absl::Span<float> out);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_INDEX_PACKING_H_

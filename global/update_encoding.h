// How the data centers' updates travel and how the GS reads them: the
// encodings the GS averages, the bound on a round's answer, and the
// validation and decoding of one SyncRound request (on core::ValidatePayload
// and core::DecodeFinite, as every server validates its peers' payloads).
// Pure functions and plain types: safe from any thread.
#ifndef TERN_GLOBAL_UPDATE_ENCODING_H_
#define TERN_GLOBAL_UPDATE_ENCODING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "global/messages.h"
#include "kernels/codec.h"
#include "kernels/payload.h"

namespace tern::global {

// How one chunk's updates are read and its answer written. Fixed by the
// first registration and never changed.
struct ChunkSpec {
  uint64_t num_elements = 0;
  kernels::CodecId codec = kernels::CodecId::kUnspecified;
  kernels::Layout layout = kernels::Layout::kUnspecified;
  // Decodes the updates and encodes the answer; owned by the aggregator.
  const kernels::Codec* kernel = nullptr;
};

// The layout the updates of `codec` travel in, `requested` resolved to the
// codec's default; INVALID_ARGUMENT for what the GS cannot average.
//
// LAYOUT_INDEX_VALUE (the sparse fp32 updates of the `gaia` mode) is not
// accepted yet: its packing (kernels/index_packing.h) is private to
// kernels/, so the GS cannot decode or write it; `gaia` sends fp32 RAW and
// gets fp32 RAW back until it is visible (global/README.md).
absl::StatusOr<kernels::Layout> UpdateLayout(kernels::CodecId codec,
                                             kernels::Layout requested);

// Whether the widest answer of a model (every chunk sent, every element
// nonzero) fits `max_message_bytes`: the LPSs' requests are no larger.
// `fp32_chunk_keys` ascending and below chunk_elements.size(); `layout`
// resolved by UpdateLayout. Counts beyond core::kMaxTensorElements never
// fit, and the sum cannot overflow.
bool AnswerFits(const std::vector<uint64_t>& chunk_elements,
                const std::vector<uint32_t>& fp32_chunk_keys,
                kernels::CodecId codec, kernels::Layout layout,
                uint64_t max_message_bytes);

// A request's chunks, decoded.
struct DecodedUpdates {
  std::vector<std::pair<uint32_t, std::vector<float>>> chunks;
  // Chunks sent in fp32 RAW although their codec is another (an LPS's
  // final synchronization): their average is answered in fp32.
  std::vector<uint32_t> exact;
  // Codec payload bytes (data and scalers) of the updates.
  uint64_t bytes = 0;
};

// Validates (core::ValidatePayload: codec, layout, format version, count,
// summands, scalers finite and within the magnitude rule) and decodes
// (core::DecodeFinite: the bytes, values finite and |x| <= 1e30) every
// update of `request`, before any of it is added to the round; `specs[i]`
// describes the chunk of update i, and `fp32` decodes the updates sent in
// fp32 RAW in place of their codec. INVALID_ARGUMENT "round 0: chunk 1 of data center 2: ..."
// for the first update that is not valid.
absl::StatusOr<DecodedUpdates> DecodeUpdates(
    const SyncRequest& request, const std::vector<const ChunkSpec*>& specs,
    const kernels::Codec* fp32);

}  // namespace tern::global

#endif  // TERN_GLOBAL_UPDATE_ENCODING_H_

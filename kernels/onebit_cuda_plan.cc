#include "kernels/onebit_cuda_plan.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/onebit.h"

namespace tern::kernels {
namespace {

// The grid's x dimension holds at most 2^31 - 1 CTAs.
constexpr uint64_t kMaxCtas = std::numeric_limits<int32_t>::max();

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// Appends chunk i's first CTA and adds its `ctas`; false past kMaxCtas.
bool AddCtas(uint64_t ctas, std::vector<uint32_t>* first_cta,
             uint64_t* total) {
  first_cta->push_back(static_cast<uint32_t>(*total));
  *total += ctas;
  return *total <= kMaxCtas;
}

}  // namespace

absl::StatusOr<OneBitCudaPlan> PlanOneBitCuda(
    absl::Span<const CudaOneBitChunk> chunks, uint64_t num_values,
    uint32_t sample_size, bool disjoint) {
  OneBitCudaPlan plan;
  uint64_t element_ctas = 0;
  uint64_t draw_ctas = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CudaOneBitChunk& chunk = chunks[i];
    if (chunk.count > num_values || chunk.offset > num_values - chunk.count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table entry %d (key %d): values [%d, %d + %d) are "
          "outside the buffer of %d",
          i, chunk.key, chunk.offset, chunk.offset, chunk.count, num_values));
    }
    if (chunk.count > kMaxOneBitElements) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table entry %d (key %d) of %d values is above the "
          "limit of %d",
          i, chunk.key, chunk.count, kMaxOneBitElements));
    }
    const uint64_t group_size = OneBitGroupSize(chunk.count, chunk.group_size);
    if (group_size > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table entry %d (key %d): groups of %d values do not "
          "fit the uint32 header",
          i, chunk.key, group_size));
    }
    const uint64_t groups = OneBitNumGroups(chunk.count, group_size);
    // Draws exist when a group is longer than the sample (GroupMeans).
    const bool sampled = sample_size != 0 && group_size > sample_size;
    cuda::OneBitChunk entry;
    entry.offset = chunk.offset;
    entry.count = chunk.count;
    entry.group_size = group_size;
    entry.first_group = plan.num_groups;
    entry.packed_offset = plan.packed_bytes;
    entry.key = chunk.key;
    entry.sample_size = sample_size;
    plan.chunks.push_back(entry);
    plan.num_groups += groups;
    plan.packed_bytes += SignBitsBytes(chunk.count);
    if (!AddCtas(CeilDiv(chunk.count, cuda::kOneBitElementsPerCta),
                 &plan.element_first_cta, &element_ctas) ||
        !AddCtas(sampled ? CeilDiv(groups * sample_size,
                                   cuda::kOneBitDrawsPerCta)
                         : 0,
                 &plan.draw_first_cta, &draw_ctas)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "onebit chunk table of %d entries needs more than %d CTAs",
          chunks.size(), kMaxCtas));
    }
  }
  plan.element_ctas = static_cast<uint32_t>(element_ctas);
  plan.draw_ctas = static_cast<uint32_t>(draw_ctas);
  if (disjoint) {
    std::vector<size_t> order(chunks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return chunks[a].offset < chunks[b].offset;
    });
    uint64_t end = 0;
    size_t previous = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const CudaOneBitChunk& chunk = chunks[order[k]];
      if (chunk.count == 0) continue;
      if (k > 0 && chunk.offset < end) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "onebit chunk table entries %d and %d overlap in the residual",
            previous, order[k]));
      }
      end = chunk.offset + chunk.count;
      previous = order[k];
    }
  }
  return plan;
}

std::vector<Payload> OneBitPayloads(const OneBitCudaPlan& plan,
                                    absl::Span<const uint8_t> packed,
                                    absl::Span<const float> means) {
  std::vector<Payload> payloads(plan.chunks.size());
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const cuda::OneBitChunk& entry = plan.chunks[i];
    Payload& payload = payloads[i];
    payload.codec = CodecId::kOneBit;
    payload.layout = Layout::kSignBits;
    payload.num_elements = entry.count;
    payload.num_summands = 1;
    const uint64_t groups = OneBitNumGroups(entry.count, entry.group_size);
    payload.scalers.assign(means.begin() + 2 * entry.first_group,
                           means.begin() + 2 * (entry.first_group + groups));
    // data = the little-endian uint32 group_size, then the sign bits.
    const uint32_t header = static_cast<uint32_t>(entry.group_size);
    payload.data.resize(4 + SignBitsBytes(entry.count));
    std::memcpy(payload.data.data(), &header, 4);
    if (entry.count != 0) {
      std::memcpy(payload.data.data() + 4, packed.data() + entry.packed_offset,
                  SignBitsBytes(entry.count));
    }
  }
  return payloads;
}

}  // namespace tern::kernels

#include "kernels/onebit.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/kernel_util.h"
#include "kernels/onebit_math.h"

namespace tern::kernels {
namespace {

// The means of one group's summands, visited twice by `each(visit)`: the
// largest magnitude first, then the fixed-point sums by sign
// (onebit_math.h), so the result does not depend on the order of visits.
template <typename ForEachSummand>
void FixedPointMeans(uint64_t count, ForEachSummand each, float* out) {
  uint32_t max_bits = 0;
  each([&](float value) {
    const uint32_t bits = onebit::MagnitudeBits(value);
    max_bits = bits > max_bits ? bits : max_bits;
  });
  const int shift = onebit::FixedShift(max_bits, count);
  int64_t positive_sum = 0;
  int64_t negative_sum = 0;
  uint64_t positives = 0;
  each([&](float value) {
    const int64_t fixed = onebit::ToFixed(value, shift);
    const bool non_negative = value >= 0.0f;
    positive_sum += non_negative ? fixed : 0;
    negative_sum += non_negative ? 0 : fixed;
    positives += non_negative ? 1 : 0;
  });
  const uint64_t negatives = count - positives;
  out[0] = positives == 0 ? 0.0f
                          : onebit::FixedMean(positive_sum, shift, positives);
  out[1] = negatives == 0 ? 0.0f
                          : onebit::FixedMean(negative_sum, shift, negatives);
}

void ExactMeans(const float* group, uint64_t length, float* out) {
  FixedPointMeans(
      length,
      [&](auto visit) {
        for (uint64_t k = 0; k < length; ++k) visit(group[k]);
      },
      out);
}

// Draws [first_draw, first_draw + sample_size) of the chunk (GroupMeans
// documents the numbering) from a group of `length` < 2^32 elements;
// `indices` is scratch of sample_size entries.
void SampledMeans(const float* group, uint64_t length, uint32_t sample_size,
                  uint64_t first_draw, const RandomStream& stream,
                  std::vector<uint32_t>& indices, float* out) {
  uint64_t block = ~uint64_t{0};
  PhiloxCounter words{};
  for (uint32_t j = 0; j < sample_size; ++j) {
    const uint64_t draw = first_draw + j;
    if (draw / 4 != block) {
      block = draw / 4;
      words = RandomWords(stream, static_cast<uint32_t>(block));
    }
    indices[j] = static_cast<uint32_t>((uint64_t{words.v[draw % 4]} * length) >> 32);
  }
  FixedPointMeans(
      sample_size,
      [&](auto visit) {
        for (uint32_t j = 0; j < sample_size; ++j) visit(group[indices[j]]);
      },
      out);
}

}  // namespace

uint64_t OneBitGroupSize(uint64_t num_elements, uint64_t requested) {
  const uint64_t group =
      requested == 0 || requested > num_elements ? num_elements : requested;
  return std::max<uint64_t>(group, 1);
}

uint64_t OneBitNumGroups(uint64_t num_elements, uint64_t group_size) {
  return num_elements / group_size + (num_elements % group_size != 0 ? 1 : 0);
}

size_t SignBitsBytes(uint64_t num_elements) {
  return static_cast<size_t>(num_elements / 8 + (num_elements % 8 != 0));
}

absl::Status CheckFiniteValues(absl::Span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "element %d is %g, want a finite value", i, values[i]));
    }
  }
  return absl::OkStatus();
}

void GroupMeans(absl::Span<const float> values, uint64_t group_size,
                uint32_t sample_size, const RandomStream& stream,
                absl::Span<float> means) {
  TERN_KERNEL_CHECK(group_size >= 1);
  TERN_KERNEL_CHECK(values.size() <= kMaxOneBitElements);
  const uint64_t n = values.size();
  const uint64_t groups = OneBitNumGroups(n, group_size);
  TERN_KERNEL_CHECK(means.size() == 2 * groups);
  std::vector<uint32_t> indices;  // the sampled groups' draws
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t begin = g * group_size;
    const uint64_t length = std::min(group_size, n - begin);
    float* out = means.data() + 2 * g;
    if (sample_size == 0 || length <= sample_size) {
      ExactMeans(values.data() + begin, length, out);
    } else {
      // length > sample_size, so every draw number is below n (and below
      // 2^34) and length < 2^32 fits the multiply-shift.
      if (indices.empty()) indices.resize(sample_size);
      SampledMeans(values.data() + begin, length, sample_size,
                   g * uint64_t{sample_size}, stream, indices, out);
    }
  }
}

void PackSignBits(absl::Span<const float> values, absl::Span<uint8_t> out) {
  const size_t n = values.size();
  TERN_KERNEL_CHECK(out.size() == SignBitsBytes(n));
  const float* in = values.data();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32_t byte = 0;
    for (uint32_t b = 0; b < 8; ++b) {
      byte |= static_cast<uint32_t>(in[i + b] >= 0.0f) << b;
    }
    out[i / 8] = static_cast<uint8_t>(byte);
  }
  if (i < n) {
    uint32_t byte = 0;
    for (uint32_t b = 0; i + b < n; ++b) {
      byte |= static_cast<uint32_t>(in[i + b] >= 0.0f) << b;
    }
    out[i / 8] = static_cast<uint8_t>(byte);
  }
}

absl::Status DecodeSignBits(absl::Span<const uint8_t> bits, uint64_t group_size,
                            absl::Span<const float> means,
                            absl::Span<float> out) {
  const uint64_t n = out.size();
  if (group_size == 0) {
    return absl::InvalidArgumentError("SIGN_BITS payload: group_size is 0");
  }
  const uint64_t groups = OneBitNumGroups(n, group_size);
  if (means.size() != 2 * groups) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SIGN_BITS payload of %d elements in groups of %d has %d scalers, "
        "want %d",
        n, group_size, means.size(), 2 * groups));
  }
  if (bits.size() != SignBitsBytes(n)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("SIGN_BITS payload of %d elements has %d bytes of "
                        "sign bits, want %d",
                        n, bits.size(), SignBitsBytes(n)));
  }
  const uint32_t tail_bits = static_cast<uint32_t>(n % 8);
  if (tail_bits != 0 && (bits.back() >> tail_bits) != 0) {
    return absl::InvalidArgumentError(
        "SIGN_BITS payload: nonzero padding bits in the last byte");
  }
  const uint8_t* in = bits.data();
  float* values = out.data();
  for (uint64_t g = 0; g < groups; ++g) {
    const float positive = means[2 * g];
    const float negative = means[2 * g + 1];
    const uint64_t end = std::min(n, (g + 1) * group_size);
    for (uint64_t i = g * group_size; i < end; ++i) {
      const bool set = ((in[i / 8] >> (i % 8)) & 1u) != 0;
      values[i] = set ? positive : negative;
    }
  }
  return absl::OkStatus();
}

}  // namespace tern::kernels

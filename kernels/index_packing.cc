#include "kernels/index_packing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/payload_checks.h"

namespace tern::kernels {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the sparse layouts are little-endian; these copies assume the "
              "host is");

constexpr size_t kWordBytes = 4;
constexpr size_t kPairBytes = 8;

uint32_t LoadWord(const uint8_t* bytes) {
  uint32_t word;
  std::memcpy(&word, bytes, kWordBytes);
  return word;
}

// Checks that `index`, the `position`-th of the payload, is in range and
// above the previous one (`previous` < 0 for the first).
absl::Status CheckIndex(CodecId codec, uint64_t index, int64_t previous,
                        size_t position, uint64_t num_elements) {
  if (index >= num_elements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s payload index %d (entry %d) is out of range: %d elements",
        CodecName(codec), index, position, num_elements));
  }
  if (previous >= 0 && index <= static_cast<uint64_t>(previous)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s payload index %d (entry %d) does not increase on the previous "
        "index %d",
        CodecName(codec), index, position, previous));
  }
  return absl::OkStatus();
}

absl::Status DecodeIndexSign(const Payload& payload, CodecId codec,
                             absl::Span<float> out) {
  const char* name = CodecName(codec);
  const absl::Span<const uint8_t> data = DataBytes(payload);
  if (data.size() < kWordBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s INDEX_SIGN payload has %d bytes, too few for its group_size", name,
        data.size()));
  }
  if (data.size() % kWordBytes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s INDEX_SIGN payload has %d bytes, not whole 4-byte words", name,
        data.size()));
  }
  const uint32_t group_size = LoadWord(data.data());
  if (group_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s INDEX_SIGN payload has group_size 0", name));
  }
  const uint64_t groups = NumGroups(out.size(), group_size);
  if (payload.scalers.size() != 2 * groups) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s INDEX_SIGN payload has %d scalers, want %d (2 per group of %d "
        "in %d elements)",
        name, payload.scalers.size(), 2 * groups, group_size, out.size()));
  }
  for (size_t i = 0; i < payload.scalers.size(); ++i) {
    const float scaler = payload.scalers[i];
    const bool positive = i % 2 == 0;
    if (!std::isfinite(scaler) || (positive ? scaler < 0.0f : scaler > 0.0f)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s INDEX_SIGN payload scaler %d (group %d's %s value) is %g, want "
          "a finite value %s 0",
          name, i, i / 2, positive ? "positive" : "negative", scaler,
          positive ? ">=" : "<="));
    }
  }
  const size_t count = data.size() / kWordBytes - 1;
  const uint8_t* words = data.data() + kWordBytes;
  int64_t previous = -1;
  for (size_t k = 0; k < count; ++k) {
    const uint32_t index = LoadWord(words + k * kWordBytes) >> 1;
    absl::Status status = CheckIndex(codec, index, previous, k, out.size());
    if (!status.ok()) return status;
    previous = index;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t k = 0; k < count; ++k) {
    const uint32_t word = LoadWord(words + k * kWordBytes);
    const uint32_t index = word >> 1;
    out[index] = payload.scalers[2 * (index / group_size) + (word & 1u)];
  }
  return absl::OkStatus();
}

absl::Status DecodeIndexValue(const Payload& payload, CodecId codec,
                              absl::Span<float> out) {
  const char* name = CodecName(codec);
  if (!payload.scalers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s INDEX_VALUE payload has %d scalers, want 0", name,
                        payload.scalers.size()));
  }
  const absl::Span<const uint8_t> data = DataBytes(payload);
  if (data.size() % kPairBytes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s INDEX_VALUE payload has %d bytes, not whole 8-byte pairs", name,
        data.size()));
  }
  const size_t count = data.size() / kPairBytes;
  int64_t previous = -1;
  for (size_t k = 0; k < count; ++k) {
    const uint32_t index = LoadWord(data.data() + k * kPairBytes);
    absl::Status status = CheckIndex(codec, index, previous, k, out.size());
    if (!status.ok()) return status;
    float value;
    std::memcpy(&value, data.data() + k * kPairBytes + kWordBytes, 4);
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s INDEX_VALUE payload value of index %d (entry %d) is %g", name,
          index, k, value));
    }
    previous = index;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t k = 0; k < count; ++k) {
    const uint8_t* pair = data.data() + k * kPairBytes;
    std::memcpy(&out[LoadWord(pair)], pair + kWordBytes, 4);
  }
  return absl::OkStatus();
}

absl::Status DecodeIndex2Bit(const Payload& payload, CodecId codec,
                             absl::Span<float> out) {
  const char* name = CodecName(codec);
  if (payload.scalers.size() != 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s INDEX_2BIT payload has %d scalers, want 2 (small and large "
        "magnitude)",
        name, payload.scalers.size()));
  }
  const float small = payload.scalers[0];
  const float large = payload.scalers[1];
  if (!std::isfinite(small) || !std::isfinite(large) || small < 0.0f ||
      large < small) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s INDEX_2BIT payload scalers are (%g, %g), want finite magnitudes "
        "with 0 <= small <= large",
        name, small, large));
  }
  const absl::Span<const uint8_t> data = DataBytes(payload);
  if (data.size() % kWordBytes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s INDEX_2BIT payload has %d bytes, not whole 4-byte words", name,
        data.size()));
  }
  const size_t count = data.size() / kWordBytes;
  int64_t previous = -1;
  for (size_t k = 0; k < count; ++k) {
    const uint32_t index = LoadWord(data.data() + k * kWordBytes) >> 2;
    absl::Status status = CheckIndex(codec, index, previous, k, out.size());
    if (!status.ok()) return status;
    previous = index;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t k = 0; k < count; ++k) {
    const uint32_t word = LoadWord(data.data() + k * kWordBytes);
    const float magnitude = (word & 2u) != 0 ? large : small;
    out[word >> 2] = (word & 1u) != 0 ? -magnitude : magnitude;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSparseInput(absl::Span<const float> values, CodecId codec) {
  if (values.size() >= kMaxSparseElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s chunk of %d values is too long: indices have 31 bits, so a chunk "
        "must have fewer than %d",
        CodecName(codec), values.size(), kMaxSparseElements));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s chunk value %d is %g, want a finite value",
                          CodecName(codec), i, values[i]));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSparseLayouts(const CodecOptions& options, CodecId codec,
                                Layout layout) {
  for (const Layout requested : {options.push_layout, options.pull_layout}) {
    if (requested != Layout::kUnspecified && requested != layout) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "codec %s with these options writes layout %s, not %s",
          CodecName(codec), LayoutName(layout), LayoutName(requested)));
    }
  }
  return absl::OkStatus();
}

void PackIndexSign(uint32_t group_size, absl::Span<const uint32_t> words,
                   absl::Span<const float> scalers, Payload* payload) {
  absl::Span<uint8_t> data =
      ResizeData(payload, kWordBytes * (1 + words.size()));
  std::memcpy(data.data(), &group_size, kWordBytes);
  if (!words.empty()) {
    std::memcpy(data.data() + kWordBytes, words.data(),
                kWordBytes * words.size());
  }
  payload->scalers.assign(scalers.begin(), scalers.end());
}

void PackIndexSignMeans(absl::Span<const float> values,
                        float positive_threshold, float negative_threshold,
                        uint32_t group_size, Payload* payload) {
  const uint64_t groups = NumGroups(values.size(), group_size);
  std::vector<uint32_t> words;
  std::vector<float> scalers(2 * groups, 0.0f);
  for (uint64_t g = 0; g < groups; ++g) {
    const size_t begin = g * group_size;
    const size_t end = std::min<size_t>(values.size(), begin + group_size);
    // Sums in double: a group may send millions of values.
    double positive_sum = 0.0;
    double negative_sum = 0.0;
    size_t positive_count = 0;
    size_t negative_count = 0;
    for (size_t i = begin; i < end; ++i) {
      const float value = values[i];
      if (value > 0.0f && value >= positive_threshold) {
        words.push_back(IndexSignWord(static_cast<uint32_t>(i), false));
        positive_sum += value;
        ++positive_count;
      } else if (value < 0.0f && value <= negative_threshold) {
        words.push_back(IndexSignWord(static_cast<uint32_t>(i), true));
        negative_sum += value;
        ++negative_count;
      }
    }
    // A mean of floats, rounded once, lies within their range: the positive
    // mean stays > 0 and the negative one < 0.
    if (positive_count > 0) {
      scalers[2 * g] = static_cast<float>(positive_sum / positive_count);
    }
    if (negative_count > 0) {
      scalers[2 * g + 1] = static_cast<float>(negative_sum / negative_count);
    }
  }
  PackIndexSign(group_size, words, scalers, payload);
}

void PackIndex2Bit(absl::Span<const float> values, float threshold,
                   Payload* payload) {
  float largest = 0.0f;
  for (const float value : values) {
    if (value != 0.0f && std::fabs(value) >= threshold) {
      largest = std::max(largest, std::fabs(value));
    }
  }
  // Halfway, written so that it cannot overflow near FLT_MAX, and never
  // above the largest, which is therefore always large.
  const float boundary =
      std::min(largest, threshold + (largest - threshold) / 2);
  std::vector<uint32_t> words;
  // Sums in double: a chunk may keep millions of values.
  double sums[2] = {0.0, 0.0};
  size_t counts[2] = {0, 0};
  for (size_t i = 0; i < values.size(); ++i) {
    const float value = values[i];
    const float magnitude = std::fabs(value);
    if (value == 0.0f || !(magnitude >= threshold)) continue;
    const uint32_t large = magnitude >= boundary ? 1u : 0u;
    words.push_back((static_cast<uint32_t>(i) << 2) | (large << 1) |
                    (value < 0.0f ? 1u : 0u));
    sums[large] += magnitude;
    ++counts[large];
  }
  // A mean of floats, rounded once, lies within their range: small values
  // are below the boundary and large ones at or above it, so small <= large.
  payload->scalers.assign(2, 0.0f);
  for (int bucket = 0; bucket < 2; ++bucket) {
    if (counts[bucket] > 0) {
      payload->scalers[bucket] =
          static_cast<float>(sums[bucket] / counts[bucket]);
    }
  }
  absl::Span<uint8_t> data = ResizeData(payload, kWordBytes * words.size());
  if (!words.empty()) {
    std::memcpy(data.data(), words.data(), kWordBytes * words.size());
  }
}

void PackIndexValue(absl::Span<const uint32_t> indices,
                    absl::Span<const float> values, Payload* payload) {
  absl::Span<uint8_t> data = ResizeData(payload, kPairBytes * indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    std::memcpy(data.data() + k * kPairBytes, &indices[k], kWordBytes);
    std::memcpy(data.data() + k * kPairBytes + kWordBytes, &values[k], 4);
  }
  payload->scalers.clear();
}

absl::Status DecodeSparsePayload(const Payload& payload, CodecId codec,
                                 Layout layout, absl::Span<float> out) {
  absl::Status status = CheckPayloadHeader(payload, codec, out.size());
  if (!status.ok()) return status;
  if (payload.layout != layout) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s payload has layout %s, want %s", CodecName(codec),
                        LayoutName(payload.layout), LayoutName(layout)));
  }
  if (payload.num_summands < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s payload has 0 summands, want at least 1", CodecName(codec)));
  }
  switch (layout) {
    case Layout::kIndexSign:
      return DecodeIndexSign(payload, codec, out);
    case Layout::kIndexValue:
      return DecodeIndexValue(payload, codec, out);
    case Layout::kIndex2Bit:
      return DecodeIndex2Bit(payload, codec, out);
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s payload layout %s is not a sparse layout",
                      CodecName(codec), LayoutName(layout)));
}

}  // namespace tern::kernels

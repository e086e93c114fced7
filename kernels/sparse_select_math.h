// The arithmetic of the sampled threshold selection (sparse_select.cc) and
// of the sparse encoders' selection (dropping_codec.cc, PackIndexSignMeans
// in index_packing.cc), written once as __host__ __device__ functions for
// the CUDA kernels (sparse_gpu.cu). sparse_select_math_test.cc runs them on
// the host and compares the results with the CPU code bit for bit, on
// machines without a GPU.
//
// Why a radix select gives the CPU's threshold: the CPU takes the k-th
// order statistic of the sample with std::nth_element, and the k-th order
// statistic of a multiset does not depend on the order of its elements. The
// kernels map every finite sample value to a 32-bit key whose unsigned
// order is the values' order (OrderedKey; -0 as +0, the one pair of equal
// values with different bits) and select the k-th key digit by digit from
// the top (8 bits per pass, four passes): the same element, so the same
// bits.
//
// Bit-identity of the group means also needs IEEE double arithmetic on the
// device (nvcc's defaults; never --use_fast_math); the _rn intrinsics keep
// nvcc from contracting products and sums into fused multiply-adds.
#ifndef TERN_KERNELS_SPARSE_SELECT_MATH_H_
#define TERN_KERNELS_SPARSE_SELECT_MATH_H_

#include <cstdint>
#include <cstring>

#include "common/philox.h"

namespace tern::kernels::sparse {

// ---------------------------------------------------------------------------
// The sample (DrawIndices in sparse_select.cc).

// How many values the sample holds before non-finite ones are dropped: the
// whole input when it has at most sample_size values, sample_size draws
// otherwise (SampleIsDrawn).
TERN_HOST_DEVICE uint32_t SampleSlots(uint64_t total, uint32_t sample_size) {
  return total <= sample_size ? static_cast<uint32_t>(total) : sample_size;
}
TERN_HOST_DEVICE bool SampleIsDrawn(uint64_t total, uint32_t sample_size) {
  return total > sample_size;
}

// Draw j takes the 64-bit word (v[2r+1] << 32) | v[2r], r = j % 2, of
// RandomWords(stream, j / 2) ...
TERN_HOST_DEVICE uint64_t DrawWord(const PhiloxCounter& words, uint32_t j) {
  const uint32_t r = j % 2;
  return (static_cast<uint64_t>(words.v[2 * r + 1]) << 32) | words.v[2 * r];
}

// ... and maps it to floor(word * total / 2^64), an index in [0, total).
TERN_HOST_DEVICE uint64_t DrawIndex(uint64_t word, uint64_t total) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(word, total);
#else
  return static_cast<uint64_t>(
      (static_cast<unsigned __int128>(word) * total) >> 64);
#endif
}

// The index of draw j of `stream` among `total` values.
TERN_HOST_DEVICE uint64_t SampleIndex(const RandomStream& stream, uint32_t j,
                                      uint64_t total) {
  return DrawIndex(DrawWord(RandomWords(stream, j / 2), j), total);
}

// A nonempty chunk of a flat buffer as the sampling kernel sees it: its
// first value is number `first` of the concatenation of all chunks and
// lives at values[offset]. Tables list the nonempty chunks in order, so
// `first` increases strictly from 0 (sparse_cuda_plan.h builds them).
struct SampleChunk {
  uint64_t first;
  uint64_t offset;
};

// The chunk holding value `index` of the concatenation: the last entry
// with first <= index (num_chunks >= 1, chunks[0].first == 0).
TERN_HOST_DEVICE uint32_t FindSampleChunk(const SampleChunk* chunks,
                                          uint32_t num_chunks,
                                          uint64_t index) {
  uint32_t low = 0;  // chunks[low].first <= index
  uint32_t high = num_chunks;
  while (high - low > 1) {
    const uint32_t mid = low + (high - low) / 2;
    if (chunks[mid].first <= index) {
      low = mid;
    } else {
      high = mid;
    }
  }
  return low;
}

// ---------------------------------------------------------------------------
// Keys: floats as unsigned integers in the floats' order.

// The key of no sample value (a non-finite one that the CPU does not
// take). No finite value has it: the largest finite key is 0xFF7FFFFF.
inline constexpr uint32_t kNoKey = 0xFFFFFFFFu;
// Keys of non-negative values have this bit set, keys of negative values
// do not.
inline constexpr uint32_t kNonNegativeBit = 0x80000000u;

TERN_HOST_DEVICE uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

TERN_HOST_DEVICE float BitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// std::isfinite on the bits, the same with or without denormal flushing.
TERN_HOST_DEVICE bool IsFinite(float value) {
  return (FloatBits(value) & 0x7F800000u) != 0x7F800000u;
}

// The key of a finite value: -0 shares +0's key (they compare equal and the
// CPU returns either as +0), non-negative values get the sign bit set and
// negative ones all bits flipped, so the keys' unsigned order is the
// values' order.
TERN_HOST_DEVICE uint32_t OrderedKey(float value) {
  uint32_t bits = FloatBits(value);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) ? ~bits : bits | kNonNegativeBit;
}

// The value of a key (of a finite value), +0 for the key of zero.
TERN_HOST_DEVICE float KeyValue(uint32_t key) {
  return BitsFloat((key & kNonNegativeBit) ? key & ~kNonNegativeBit : ~key);
}

// SampledMagnitudeThreshold samples |v| of the finite values.
TERN_HOST_DEVICE uint32_t MagnitudeKey(float value) {
  return IsFinite(value) ? OrderedKey(BitsFloat(FloatBits(value) & 0x7FFFFFFFu))
                         : kNoKey;
}

// SampledSignedThresholds samples the finite values themselves; the key's
// top bit is the class (value >= 0.0f: non-negative).
TERN_HOST_DEVICE uint32_t SignedKey(float value) {
  return IsFinite(value) ? OrderedKey(value) : kNoKey;
}

// ---------------------------------------------------------------------------
// Which order statistic (the rules of sparse_select.cc).

// round(fraction * count), half away from zero (std::llround), 0 for a
// fraction that is not > 0 (also NaN), count for one >= 1. The product is
// rounded once, as on the CPU, and is below 2^53 (count < 2^32), so the
// integer part is exact.
TERN_HOST_DEVICE uint64_t RoundedCount(double fraction, uint64_t count) {
  if (!(fraction > 0.0)) return 0;
  if (fraction >= 1.0) return count;
#if defined(__CUDA_ARCH__)
  const double product = __dmul_rn(fraction, static_cast<double>(count));
  const uint64_t whole = static_cast<uint64_t>(product);
  const double rest = __dsub_rn(product, static_cast<double>(whole));
#else
  const double product = fraction * static_cast<double>(count);
  const uint64_t whole = static_cast<uint64_t>(product);
  const double rest = product - static_cast<double>(whole);
#endif
  return whole + (rest >= 0.5 ? 1 : 0);
}

enum class SelectRule : uint32_t {
  // SampledMagnitudeThreshold: the (k+1)-th smallest magnitude, k =
  // min(round(drop_ratio * m), m - 1).
  kMagnitude = 0,
  // SampledSignedThresholds: the sent-th largest non-negative value, sent =
  // clamp(round(proportion * m), 1, m) ...
  kPositive = 1,
  // ... and the sent-th smallest negative value.
  kNegative = 2,
};

// The 0-based ascending rank of the threshold among the m > 0 sample
// values of the rule's class.
TERN_HOST_DEVICE uint64_t SelectRank(SelectRule rule, float fraction,
                                     uint64_t m) {
  const uint64_t rounded = RoundedCount(fraction, m);
  if (rule == SelectRule::kMagnitude) return rounded < m - 1 ? rounded : m - 1;
  const uint64_t sent = rounded < 1 ? 1 : (rounded > m ? m : rounded);
  return rule == SelectRule::kPositive ? m - sent : sent - 1;
}

// ---------------------------------------------------------------------------
// Radix select: the key of the given rank, 8 bits per pass from the top.

inline constexpr uint32_t kRadixBins = 256;
inline constexpr uint32_t kRadixPasses = 4;

// One selection in progress. The sample keys that match (prefix, mask) are
// the candidates; each pass histograms the candidates' next digit, picks
// the bin holding the rank-th candidate and fixes that digit. Plain data,
// copied between host and device as is.
struct RadixSelect {
  uint64_t rank;     // among the candidates (valid once count > 0)
  uint64_t count;    // sample values of the class (set by pass 0)
  uint32_t prefix;   // the fixed bits of the key
  uint32_t mask;     // which bits are fixed
  uint32_t rule;     // SelectRule
  float fraction;    // drop_ratio or proportion
};

// Before pass 0 only the class bit is fixed: magnitudes and non-negative
// values have it set, negative values clear.
TERN_HOST_DEVICE RadixSelect StartSelect(SelectRule rule, float fraction) {
  RadixSelect select;
  select.rank = 0;
  select.count = 0;
  select.prefix = rule == SelectRule::kNegative ? 0u : kNonNegativeBit;
  select.mask = kNonNegativeBit;
  select.rule = static_cast<uint32_t>(rule);
  select.fraction = fraction;
  return select;
}

TERN_HOST_DEVICE bool IsCandidate(const RadixSelect& select, uint32_t key) {
  return key != kNoKey && (key & select.mask) == select.prefix;
}

// The digit of `key` that pass `pass` (0 = the top 8 bits) histograms.
TERN_HOST_DEVICE uint32_t RadixDigit(uint32_t key, uint32_t pass) {
  return (key >> (24 - 8 * pass)) & (kRadixBins - 1);
}

// Folds the histogram of pass `pass` (the candidates' digits) into the
// selection: pass 0 counts the class and sets the rank; every pass fixes
// the digit of the bin holding the rank-th candidate. A class with no
// values stays empty (count 0).
TERN_HOST_DEVICE void RadixSelectStep(RadixSelect* select, uint32_t pass,
                                      const uint32_t* histogram) {
  if (pass == 0) {
    uint64_t count = 0;
    for (uint32_t d = 0; d < kRadixBins; ++d) count += histogram[d];
    select->count = count;
    if (count == 0) return;
    select->rank = SelectRank(static_cast<SelectRule>(select->rule),
                              select->fraction, count);
  }
  if (select->count == 0) return;
  uint64_t below = 0;
  uint32_t digit = kRadixBins - 1;
  for (uint32_t d = 0; d < kRadixBins; ++d) {
    if (select->rank < below + histogram[d]) {
      digit = d;
      break;
    }
    below += histogram[d];
  }
  const uint32_t shift = 24 - 8 * pass;
  select->prefix = (select->prefix & ~(0xFFu << shift)) | (digit << shift);
  select->mask |= 0xFFu << shift;
  select->rank -= below;
}

// Writes the finished selection's threshold where the encoders read it:
// thresholds[0] is the positive threshold, thresholds[1] the negative one.
// A magnitude t writes (t, -t) (dropping keeps v > 0 with v >= t and v < 0
// with v <= -t, i.e. |v| >= t and v != 0); an empty class writes 0 (+0, or
// -0 for the negated magnitude, as the CPU's -threshold).
TERN_HOST_DEVICE void StoreThreshold(const RadixSelect& select,
                                     float* thresholds) {
  const float value = select.count == 0 ? 0.0f : KeyValue(select.prefix);
  switch (static_cast<SelectRule>(select.rule)) {
    case SelectRule::kMagnitude:
      thresholds[0] = value;
      thresholds[1] = BitsFloat(FloatBits(value) ^ 0x80000000u);
      break;
    case SelectRule::kPositive:
      thresholds[0] = value;
      break;
    case SelectRule::kNegative:
      thresholds[1] = value;
      break;
  }
}

// ---------------------------------------------------------------------------
// What the encoders keep.

inline constexpr uint32_t kNotKept = 0;
inline constexpr uint32_t kKeptPositive = 1;
inline constexpr uint32_t kKeptNegative = 2;

// PackIndexSignMeans' rule (and the dropping codec's with thresholds
// (t, -t)): v > 0 and v >= positive, or v < 0 and v <= negative. Zeros are
// never kept.
TERN_HOST_DEVICE uint32_t KeepKind(float value, float positive,
                                   float negative) {
  if (value > 0.0f && value >= positive) return kKeptPositive;
  if (value < 0.0f && value <= negative) return kKeptNegative;
  return kNotKept;
}

// The INDEX_SIGN word of a kept element (IndexSignWord in index_packing.h).
TERN_HOST_DEVICE uint32_t KeptWord(uint32_t index, uint32_t kind) {
  return (index << 1) | (kind == kKeptNegative ? 1u : 0u);
}

// The first of the `count` kept words (sorted by index) whose index is >=
// `index`: group g's words are [LowerBoundWord(g * size), LowerBoundWord(
// (g + 1) * size)).
TERN_HOST_DEVICE uint64_t LowerBoundWord(const uint32_t* words, uint64_t count,
                                         uint64_t index) {
  uint64_t low = 0;
  uint64_t high = count;
  while (low < high) {
    const uint64_t mid = low + (high - low) / 2;
    if ((words[mid] >> 1) < index) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low;
}

// One group's scalers from its kept words and values [begin, end): the
// mean of the positive and of the negative values, each summed in double in
// index order and divided once, 0 for a sign the group does not send
// (PackIndexSignMeans).
TERN_HOST_DEVICE void KeptMeans(const uint32_t* words, const float* kept,
                                uint64_t begin, uint64_t end, float* positive,
                                float* negative) {
  double positive_sum = 0.0;
  double negative_sum = 0.0;
  uint64_t positive_count = 0;
  uint64_t negative_count = 0;
  for (uint64_t k = begin; k < end; ++k) {
    const double value = static_cast<double>(kept[k]);
    if (words[k] & 1u) {
#if defined(__CUDA_ARCH__)
      negative_sum = __dadd_rn(negative_sum, value);
#else
      negative_sum += value;
#endif
      ++negative_count;
    } else {
#if defined(__CUDA_ARCH__)
      positive_sum = __dadd_rn(positive_sum, value);
#else
      positive_sum += value;
#endif
      ++positive_count;
    }
  }
  *positive = positive_count == 0
                  ? 0.0f
                  : static_cast<float>(
                        positive_sum / static_cast<double>(positive_count));
  *negative = negative_count == 0
                  ? 0.0f
                  : static_cast<float>(
                        negative_sum / static_cast<double>(negative_count));
}

}  // namespace tern::kernels::sparse

#endif  // TERN_KERNELS_SPARSE_SELECT_MATH_H_

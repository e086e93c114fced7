// CPU implementation of the worker-side TernGrad kernels in terngrad.h:
// statistics, scaler, ternarize-and-pack, and reading ternary codes back.
// The sums' packing is in terngrad_sums_cpu.cc.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/kernel_util.h"
#include "kernels/terngrad.h"
#include "kernels/terngrad_simd.h"

namespace tern::kernels {
namespace {

// ---------------------------------------------------------------------------
// Statistics

void AddToLane(float g, float shift, size_t lane, simd::StatsLanes* lanes) {
  const float a = std::fabs(g);
  const bool finite = a <= kMaxFiniteFloat;
  const float d = finite ? g - shift : 0.0f;
  const float kept_abs = finite ? a : 0.0f;
  lanes->sum[lane] += d;
  const float square = d * d;  // rounded on its own, as in the SIMD
  lanes->sum_squares[lane] += square;
  if (kept_abs > lanes->max_abs[lane]) lanes->max_abs[lane] = kept_abs;
  lanes->nonfinite[lane] += finite ? 0 : 1;
}

// Adds one block's lanes to the totals, lane 0 first.
void FoldLanes(const simd::StatsLanes& lanes, ChunkStats* stats) {
  for (size_t lane = 0; lane < kStatsLanes; ++lane) {
    stats->shifted_sum += static_cast<double>(lanes.sum[lane]);
    stats->shifted_sum_squares += static_cast<double>(lanes.sum_squares[lane]);
    stats->max_abs = std::max(stats->max_abs, lanes.max_abs[lane]);
    stats->nonfinite += lanes.nonfinite[lane];
  }
}

// ---------------------------------------------------------------------------
// Ternarize and pack

bool UsableScaler(float scaler) {
  return scaler > 0.0f && scaler <= kMaxFiniteFloat;
}

// Elements [begin, end) of a chunk through Ternarize(), one Philox call per
// group of four; `begin` is a multiple of 4. `emit(i, code)` receives each.
template <typename Emit>
void TernarizeScalar(const float* values, uint64_t begin, uint64_t end,
                     float bound, float scaler, const RandomStream& stream,
                     Emit&& emit) {
  for (uint64_t i = begin; i < end; i += 4) {
    const PhiloxCounter words =
        RandomWords(stream, static_cast<uint32_t>(i / 4));
    const uint64_t count = std::min<uint64_t>(4, end - i);
    for (uint64_t j = 0; j < count; ++j) {
      emit(i + j, Ternarize(values[i + j], bound, scaler, words.v[j]));
    }
  }
}

// The widest SIMD variant this CPU runs; each handles a multiple of
// simd::kSimdBlock elements from the start and returns how many.
size_t TwoBitSimd(const float* values, size_t n, float bound, float scaler,
                  const RandomStream& stream, uint8_t* out) {
#if TERN_KERNELS_X86
  if (simd::CpuHasAvx512()) {
    return simd::TwoBitAvx512(values, n, 0, bound, scaler, stream, out);
  }
  if (simd::CpuHasAvx2()) {
    return simd::TwoBitAvx2(values, n, 0, bound, scaler, stream, out);
  }
  return simd::TwoBitSse2(values, n, 0, bound, scaler, stream, out);
#else
  return 0;
#endif
}

size_t Base3DigitsSimd(const float* values, size_t n, uint32_t first_group,
                       float bound, float scaler, const RandomStream& stream,
                       uint8_t* digits) {
#if TERN_KERNELS_X86
  if (simd::CpuHasAvx512()) {
    return simd::Base3DigitsAvx512(values, n, first_group, bound, scaler,
                                   stream, digits);
  }
  if (simd::CpuHasAvx2()) {
    return simd::Base3DigitsAvx2(values, n, first_group, bound, scaler, stream,
                                 digits);
  }
  return simd::Base3DigitsSse2(values, n, first_group, bound, scaler, stream,
                               digits);
#else
  return 0;
#endif
}

void QuantizeTwoBit(absl::Span<const float> values, float bound, float scaler,
                    const RandomStream& stream, uint8_t* out) {
  const size_t n = values.size();
  const size_t done = TwoBitSimd(values.data(), n, bound, scaler, stream, out);
  // The SIMD part ends on a byte boundary; the last byte's unused fields
  // stay zero.
  const size_t rest = PackedTernaryBytes(n, Layout::kTernary2Bit) - done / 4;
  if (rest > 0) std::memset(out + done / 4, 0, rest);
  TernarizeScalar(values.data(), done, n, bound, scaler, stream,
                  [out](uint64_t i, int code) {
                    out[i / 4] |= static_cast<uint8_t>(TwoBitField(code)
                                                       << (2 * (i % 4)));
                  });
}

// d0 + 3 d1 + 9 d2 + 27 d3 + 81 d4 for the five digit bytes at `digits`,
// in one multiply: byte 4 of the product of the little-endian word of
// digits d0..d7 and these weights collects exactly d_j * 3^j, and no lower
// byte of the product exceeds 240, so nothing carries into it.
inline uint8_t PackFiveDigits(const uint8_t* digits) {
  constexpr uint64_t kWeights =
      81 | (27 << 8) | (9 << 16) | (3 << 24) | (uint64_t{1} << 32);
  return static_cast<uint8_t>((LoadLE64(digits) * kWeights) >> 32);
}

void QuantizeBase3(absl::Span<const float> values, float bound, float scaler,
                   const RandomStream& stream, uint8_t* out) {
  // Digits are made a tile at a time into a buffer that stays in L1. A tile
  // is a multiple of 5 (whole bytes) and of the SIMD block.
  constexpr size_t kTile = 3200;
  static_assert(kTile % 5 == 0 && kTile % 128 == 0, "tile must align");
  // Eight spare zero digits: PackFiveDigits reads a word, and padding
  // digits of the last byte are zero (proto: LAYOUT_TERNARY_BASE3).
  uint8_t digits[kTile + 8];
  const size_t n = values.size();
  for (size_t begin = 0; begin < n; begin += kTile) {
    const size_t len = std::min(kTile, n - begin);
    const size_t done = Base3DigitsSimd(values.data() + begin, len,
                                        static_cast<uint32_t>(begin / 4), bound,
                                        scaler, stream, digits);
    TernarizeScalar(values.data(), begin + done, begin + len, bound, scaler,
                    stream, [&digits, begin](uint64_t i, int code) {
                      digits[i - begin] =
                          static_cast<uint8_t>(Base3Digit(code));
                    });
    std::memset(digits + len, 0, 8);
    uint8_t* tile_out = out + begin / 5;
    const size_t bytes = (len + 4) / 5;
    for (size_t b = 0; b < bytes; ++b) {
      tile_out[b] = PackFiveDigits(digits + 5 * b);
    }
  }
}

// The bytes of an all-zero chunk: what a scaler of 0 (an all-zero gradient)
// encodes to without drawing any randomness.
void FillZeroCodes(uint64_t n, Layout layout, absl::Span<uint8_t> out) {
  if (layout == Layout::kTernary2Bit) {
    std::fill(out.begin(), out.end(), uint8_t{0});
    return;
  }
  // Code 0 is digit 1: 1 + 3 + 9 + 27 + 81 per full byte; the last byte's
  // padding digits are 0.
  std::fill(out.begin(), out.end(), uint8_t{121});
  if (n % 5 != 0) {
    uint8_t last = 0;
    for (uint64_t j = n % 5; j-- > 0;)
      last = static_cast<uint8_t>(last * 3 + 1);
    out[out.size() - 1] = last;
  }
}

// ---------------------------------------------------------------------------
// Reading codes back

// The codes of every possible byte, as int32 so the accumulate loops
// vectorize. Invalid bytes (a field 11, a base-3 byte above 242) are
// rejected before these tables are read; their rows are zero.
struct TwoBitRow {
  int32_t code[4];
};
struct Base3Row {
  int32_t code[5];
};

constexpr std::array<TwoBitRow, 256> MakeTwoBitRows() {
  std::array<TwoBitRow, 256> rows{};
  for (int byte = 0; byte < 256; ++byte) {
    for (int j = 0; j < 4; ++j) {
      const int field = (byte >> (2 * j)) & 3;
      rows[byte].code[j] = field == 1 ? 1 : (field == 2 ? -1 : 0);
    }
  }
  return rows;
}

constexpr std::array<Base3Row, 256> MakeBase3Rows() {
  std::array<Base3Row, 256> rows{};
  for (int byte = 0; byte < 243; ++byte) {
    int rest = byte;
    for (int j = 0; j < 5; ++j) {
      rows[byte].code[j] = rest % 3 - 1;
      rest /= 3;
    }
  }
  return rows;
}

constexpr std::array<TwoBitRow, 256> kTwoBitRows = MakeTwoBitRows();
constexpr std::array<Base3Row, 256> kBase3Rows = MakeBase3Rows();

absl::Status CheckTernaryShape(absl::Span<const uint8_t> packed,
                               uint64_t num_elements, Layout layout,
                               size_t out_size) {
  if (layout != Layout::kTernary2Bit && layout != Layout::kTernaryBase3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "layout %s is not a ternary layout", LayoutName(layout)));
  }
  if (num_elements != out_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ternary payload has %d elements, want %d", num_elements, out_size));
  }
  const size_t want = PackedTernaryBytes(num_elements, layout);
  if (packed.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s payload of %d elements has %d bytes, want %d",
                        LayoutName(layout), num_elements, packed.size(), want));
  }
  return absl::OkStatus();
}

absl::Status ValidateTwoBit(absl::Span<const uint8_t> packed,
                            uint64_t num_elements) {
  // A field is 11 when its high bit and low bit are both set.
  uint64_t bad = 0;
  size_t b = 0;
  for (; b + 8 <= packed.size(); b += 8) {
    const uint64_t word = LoadLE64(packed.data() + b);
    bad |= word & (word >> 1) & 0x5555555555555555ull;
  }
  for (; b < packed.size(); ++b) {
    bad |= packed[b] & (packed[b] >> 1) & 0x55u;
  }
  if (bad != 0) {
    for (size_t i = 0; i < packed.size(); ++i) {
      const uint32_t fields = packed[i] & (packed[i] >> 1) & 0x55u;
      if (fields != 0) {
        const int j = __builtin_ctz(fields) / 2;
        return absl::InvalidArgumentError(absl::StrFormat(
            "TERNARY_2BIT payload: invalid code 11 for element %d",
            4 * static_cast<uint64_t>(i) + j));
      }
    }
  }
  const uint64_t used = num_elements % 4;
  if (used != 0 && (packed.back() >> (2 * used)) != 0) {
    return absl::InvalidArgumentError(
        "TERNARY_2BIT payload: nonzero padding bits in the last byte");
  }
  return absl::OkStatus();
}

absl::Status ValidateBase3(absl::Span<const uint8_t> packed,
                           uint64_t num_elements) {
  // A byte is above 242 = 0b11110010 when its high bit is set and its low
  // seven bits plus 13 reach 128; the sums stay inside their bytes (at
  // most 127 + 13). Eight bytes a word, as ValidateTwoBit reads them.
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  constexpr uint64_t k13 = 0x0D0D0D0D0D0D0D0Dull;
  uint64_t bad = 0;
  size_t b = 0;
  for (; b + 8 <= packed.size(); b += 8) {
    const uint64_t word = LoadLE64(packed.data() + b);
    bad |= word & ((word & kLow7) + k13) & kHigh;
  }
  for (; b < packed.size(); ++b) bad |= packed[b] > 242 ? 1 : 0;
  if (bad != 0) {
    const size_t at = static_cast<size_t>(
        std::find_if(packed.begin(), packed.end(),
                     [](uint8_t byte) { return byte > 242; }) -
        packed.begin());
    return absl::InvalidArgumentError(absl::StrFormat(
        "TERNARY_BASE3 payload: byte %d is %d, above 242", at, packed[at]));
  }
  const uint64_t used = num_elements % 5;
  if (used != 0) {
    uint32_t limit = 1;  // 3^used: the padding digits must be zero
    for (uint64_t j = 0; j < used; ++j) limit *= 3;
    if (packed.back() >= limit) {
      return absl::InvalidArgumentError(
          "TERNARY_BASE3 payload: nonzero padding digits in the last byte");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTernary(absl::Span<const uint8_t> packed,
                             uint64_t num_elements, Layout layout,
                             size_t out_size) {
  absl::Status status =
      CheckTernaryShape(packed, num_elements, layout, out_size);
  if (!status.ok()) return status;
  return layout == Layout::kTernary2Bit ? ValidateTwoBit(packed, num_elements)
                                        : ValidateBase3(packed, num_elements);
}

// Calls visit(first_element, codes, count) for each byte of a validated
// payload, `codes` pointing at the byte's table row. Full bytes pass a
// constant count so the visitor's loop vectorizes.
template <typename Visit>
void ForEachByte(absl::Span<const uint8_t> packed, uint64_t n, Layout layout,
                 Visit&& visit) {
  const uint8_t* bytes = packed.data();
  if (layout == Layout::kTernary2Bit) {
    const uint64_t full = n / 4;
    for (uint64_t b = 0; b < full; ++b) {
      visit(4 * b, kTwoBitRows[bytes[b]].code, uint64_t{4});
    }
    if (n % 4 != 0) visit(4 * full, kTwoBitRows[bytes[full]].code, n % 4);
  } else {
    const uint64_t full = n / 5;
    for (uint64_t b = 0; b < full; ++b) {
      visit(5 * b, kBase3Rows[bytes[b]].code, uint64_t{5});
    }
    if (n % 5 != 0) visit(5 * full, kBase3Rows[bytes[full]].code, n % 5);
  }
}

// Validates all of `packed` for out.size() elements, then calls
// store(out[i], code_i) for every element; on error writes nothing.
template <typename T, typename Store>
absl::Status ValidateAndStore(absl::Span<const uint8_t> packed,
                              uint64_t num_elements, Layout layout,
                              absl::Span<T> out, Store store) {
  absl::Status status =
      ValidateTernary(packed, num_elements, layout, out.size());
  if (!status.ok()) return status;
  T* slots = out.data();
  ForEachByte(
      packed, num_elements, layout,
      [slots, &store](uint64_t first, const int32_t* row, uint64_t count) {
        for (uint64_t j = 0; j < count; ++j) {
          store(slots[first + j], row[j]);
        }
      });
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------

double ChunkStats::mean() const {
  if (count == 0) return 0.0;
  return static_cast<double>(shift) + shifted_sum / static_cast<double>(count);
}

double ChunkStats::stddev() const {
  if (count == 0) return 0.0;
  const double n = static_cast<double>(count);
  const double shifted_mean = shifted_sum / n;
  // Rounding can still leave a tiny negative variance.
  return std::sqrt(
      std::max(0.0, shifted_sum_squares / n - shifted_mean * shifted_mean));
}

ChunkStats ComputeStats(absl::Span<const float> values) {
  ChunkStats stats;
  const float* data = values.data();
  const size_t n = values.size();
  if (n > 0 && std::fabs(data[0]) <= kMaxFiniteFloat) stats.shift = data[0];
#if TERN_KERNELS_X86
  const bool avx512 = simd::CpuHasAvx512();
  const bool avx2 = simd::CpuHasAvx2();
#endif
  for (size_t begin = 0; begin < n; begin += kStatsBlockSize) {
    const size_t len = std::min<size_t>(kStatsBlockSize, n - begin);
    simd::StatsLanes lanes = {};
    size_t done = 0;
#if TERN_KERNELS_X86
    done = len / kStatsLanes * kStatsLanes;
    if (avx512) {
      simd::AccumulateStatsAvx512(data + begin, done, stats.shift, &lanes);
    } else if (avx2) {
      simd::AccumulateStatsAvx2(data + begin, done, stats.shift, &lanes);
    } else {
      simd::AccumulateStatsSse2(data + begin, done, stats.shift, &lanes);
    }
#endif
    for (size_t i = done; i < len; ++i) {
      AddToLane(data[begin + i], stats.shift, i % kStatsLanes, &lanes);
    }
    FoldLanes(lanes, &stats);
  }
  stats.count = n - stats.nonfinite;
  return stats;
}

float LocalScaler(const ChunkStats& stats, float clip) {
  if (!(clip > 0.0f)) return stats.max_abs;
  const double clipped = static_cast<double>(clip) * stats.stddev();
  // Rounding a double below max_abs to float cannot pass max_abs.
  return clipped < stats.max_abs ? static_cast<float>(clipped) : stats.max_abs;
}

size_t PackedTernaryBytes(uint64_t num_elements, Layout layout) {
  switch (layout) {
    case Layout::kTernary2Bit:
      return num_elements / 4 + (num_elements % 4 != 0 ? 1 : 0);
    case Layout::kTernaryBase3:
      return num_elements / 5 + (num_elements % 5 != 0 ? 1 : 0);
    default:
      return 0;
  }
}

void QuantizePack(absl::Span<const float> values, float clip_bound,
                  float scaler, const RandomStream& stream, Layout layout,
                  absl::Span<uint8_t> out) {
  TERN_KERNEL_CHECK(layout == Layout::kTernary2Bit ||
                    layout == Layout::kTernaryBase3);
  TERN_KERNEL_CHECK(values.size() <= kMaxTernaryElements);
  TERN_KERNEL_CHECK(out.size() == PackedTernaryBytes(values.size(), layout));
  // Ternarize() gives code 0 everywhere for these, and the SIMD loops
  // assume 0 < bound <= scaler < Inf.
  const float bound = ClipBound(clip_bound, scaler);
  if (!UsableScaler(scaler) || !(bound > 0.0f)) {
    FillZeroCodes(values.size(), layout, out);
  } else if (layout == Layout::kTernary2Bit) {
    QuantizeTwoBit(values, bound, scaler, stream, out.data());
  } else {
    QuantizeBase3(values, bound, scaler, stream, out.data());
  }
}

absl::Status CheckTernaryCodes(absl::Span<const uint8_t> packed,
                               uint64_t num_elements, Layout layout) {
  return ValidateTernary(packed, num_elements, layout, num_elements);
}

absl::Status UnpackTernary(absl::Span<const uint8_t> packed,
                           uint64_t num_elements, Layout layout,
                           absl::Span<int8_t> codes) {
  return ValidateAndStore(
      packed, num_elements, layout, codes,
      [](int8_t& slot, int32_t code) { slot = static_cast<int8_t>(code); });
}

absl::Status AccumulateTernary(absl::Span<const uint8_t> packed,
                               uint64_t num_elements, Layout layout,
                               absl::Span<int32_t> sums) {
  return ValidateAndStore(packed, num_elements, layout, sums,
                          [](int32_t& slot, int32_t code) { slot += code; });
}

absl::Status AssignTernary(absl::Span<const uint8_t> packed,
                           uint64_t num_elements, Layout layout,
                           absl::Span<int32_t> sums) {
  return ValidateAndStore(packed, num_elements, layout, sums,
                          [](int32_t& slot, int32_t code) { slot = code; });
}

absl::Status DecodeTernary(absl::Span<const uint8_t> packed,
                           uint64_t num_elements, Layout layout, float scaler,
                           absl::Span<float> out) {
  const float factor = DecodeFactor(scaler, 1);
  return ValidateAndStore(packed, num_elements, layout, out,
                          [factor](float& slot, int32_t code) {
                            slot = DecodeValue(code, factor);
                          });
}

}  // namespace tern::kernels

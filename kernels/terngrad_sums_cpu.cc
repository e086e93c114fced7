// CPU implementation of the sums' layouts in terngrad.h: what a server
// sends back after adding the N workers' ternary codes (DESIGN section 3,
// step 5), packed as LAYOUT_SUM_BITS or LAYOUT_SUM_RADIX; LAYOUT_SUM_HUFFMAN
// (sum_huffman.cc) is read through the same entry points.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/kernel_util.h"
#include "kernels/sum_bits.h"
#include "kernels/sum_huffman.h"
#include "kernels/terngrad.h"
#include "kernels/terngrad_simd.h"

namespace tern::kernels {
namespace {

bool ValidSummands(uint32_t num_summands) {
  return num_summands >= 1 && num_summands <= kMaxSummands;
}

// ---------------------------------------------------------------------------
// LAYOUT_SUM_BITS: (sum + N) in B bits per element, one little-endian bit
// stream. The loops are instantiated per width so that shifts and masks are
// constants.

// Field i of the stream, for the tail where whole-word reads would leave
// the buffer.
uint64_t ReadFieldSafely(const uint8_t* bytes, size_t size, uint64_t bit,
                         uint32_t width) {
  uint64_t field = 0;
  for (uint32_t got = 0; got < width;) {
    const uint64_t byte_index = (bit + got) / 8;
    const uint32_t shift = static_cast<uint32_t>((bit + got) % 8);
    const uint32_t take = std::min(width - got, 8 - shift);
    const uint64_t byte = byte_index < size ? bytes[byte_index] : 0;
    field |= ((byte >> shift) & ((1u << take) - 1)) << got;
    got += take;
  }
  return field;
}

// Calls emit(i, field) for elements [first, n) (first a multiple of 8) and
// returns the largest field.
template <uint32_t kBits, typename Emit>
uint64_t ForEachBitField(const uint8_t* bytes, size_t size, uint64_t first,
                         uint64_t n, Emit&& emit) {
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  uint64_t largest = 0;
  // Eight fields take exactly kBits bytes. A group is read with whole
  // 8-byte words while those stay inside the buffer.
  const uint64_t groups = n / 8;
  const uint64_t fast_groups =
      size >= 8 ? std::min<uint64_t>(groups, (size - 8) / kBits) : 0;
  uint64_t group = first / 8;
  for (; group < fast_groups; ++group) {
    const uint8_t* at = bytes + group * kBits;
    const uint64_t word = LoadLE64(at);
    for (uint32_t j = 0; j < 8; ++j) {
      uint64_t field;
      if constexpr (kBits <= 8) {
        field = (word >> (j * kBits)) & kMask;
      } else {
        field = (LoadLE64(at + j * kBits / 8) >> (j * kBits % 8)) & kMask;
      }
      largest = std::max(largest, field);
      emit(8 * group + j, field);
    }
  }
  for (uint64_t i = std::max(first, 8 * group); i < n; ++i) {
    const uint64_t field = ReadFieldSafely(bytes, size, i * kBits, kBits);
    largest = std::max(largest, field);
    emit(i, field);
  }
  return largest;
}

// Packs fields sums[i] + offset for elements [first, n) (first a multiple
// of 8) into the stream at `out`; returns the largest field (a negative sum
// shows up as a huge one).
template <uint32_t kBits>
uint32_t PackBitFields(const int32_t* sums, uint64_t first, uint64_t n,
                       int32_t offset, uint8_t* out) {
  uint32_t largest = 0;
  uint64_t i = first;
  out += first / 8 * kBits;
  if constexpr (kBits <= 8) {
    // Eight fields make one word of which the low kBits bytes are stored.
    for (; i + 8 <= n; i += 8) {
      uint64_t word = 0;
      for (uint32_t j = 0; j < 8; ++j) {
        const uint32_t field = static_cast<uint32_t>(sums[i + j] + offset);
        largest = std::max(largest, field);
        word |= static_cast<uint64_t>(field) << (j * kBits);
      }
      uint8_t bytes[8];
      StoreLE64(word, bytes);
      std::memcpy(out, bytes, kBits);
      out += kBits;
    }
  }
  uint64_t pending = 0;  // bits not yet written, LSB first
  uint32_t pending_bits = 0;
  for (; i < n; ++i) {
    const uint32_t field = static_cast<uint32_t>(sums[i] + offset);
    largest = std::max(largest, field);
    pending |= static_cast<uint64_t>(field) << pending_bits;
    pending_bits += kBits;
    if (pending_bits >= 32) {
      const uint32_t low = static_cast<uint32_t>(pending);
      for (int b = 0; b < 4; ++b) *out++ = static_cast<uint8_t>(low >> (8 * b));
      pending >>= 32;
      pending_bits -= 32;
    }
  }
  for (; pending_bits > 0; pending_bits -= std::min(pending_bits, 8u)) {
    *out++ = static_cast<uint8_t>(pending);
    pending >>= 8;
  }
  return largest;
}

// ---------------------------------------------------------------------------
// LAYOUT_SUM_RADIX: radix R = 2N + 1, k digits per little-endian uint64.
// A word is split into chunks below 2^32 with at most a few 64-bit
// divisions, and each chunk into digits with a multiply by a precomputed
// reciprocal (Lemire, Kaser, Kurz, "Faster remainder by direct computation",
// 2019: for a, d < 2^32, a / d == (M * a) >> 64 with M = floor((2^64-1)/d)+1).

struct Radix {
  uint64_t radix = 0;
  uint32_t digits = 0;        // per word
  uint64_t word_limit = 0;    // radix^digits; a word must be below it
  uint32_t chunk_digits = 0;  // largest c with radix^c < 2^32
  uint64_t chunk_base = 0;    // radix^chunk_digits
  uint64_t reciprocal = 0;    // M above

  explicit Radix(uint32_t num_summands)
      : radix(2 * uint64_t{num_summands} + 1) {
    word_limit = 1;
    while (word_limit <= std::numeric_limits<uint64_t>::max() / radix) {
      word_limit *= radix;
      ++digits;
    }
    chunk_base = 1;
    while (chunk_base * radix <= std::numeric_limits<uint32_t>::max()) {
      chunk_base *= radix;
      ++chunk_digits;
    }
    reciprocal = std::numeric_limits<uint64_t>::max() / radix + 1;
  }

  // chunk / radix for chunk < 2^32.
  uint64_t Divide(uint64_t chunk) const {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(reciprocal) * chunk) >> 64);
  }

  // radix^count, for count <= digits.
  uint64_t Power(uint64_t count) const {
    uint64_t power = 1;
    for (uint64_t j = 0; j < count; ++j) power *= radix;
    return power;
  }
};

// Calls emit(i, digit) for the `count` digits of `word` (elements first..).
template <typename Emit>
void ForEachDigit(const Radix& r, uint64_t word, uint64_t first, uint32_t count,
                  Emit&& emit) {
  for (uint32_t start = 0; start < count; start += r.chunk_digits) {
    uint64_t chunk = word;
    if (count - start > r.chunk_digits) {
      chunk = word % r.chunk_base;
      word /= r.chunk_base;
    }
    const uint32_t end = std::min(count, start + r.chunk_digits);
    for (uint32_t j = start; j < end; ++j) {
      const uint64_t quotient = r.Divide(chunk);
      emit(first + j, chunk - quotient * r.radix);
      chunk = quotient;
    }
  }
}

// Calls emit(i, field) for every element; on a word at or above the limit
// returns its index (nothing emitted for it), else -1.
template <typename Emit>
int64_t ForEachRadixField(const Radix& r, const uint8_t* bytes, uint64_t n,
                          Emit&& emit) {
  const uint64_t words = n / r.digits + (n % r.digits != 0 ? 1 : 0);
  for (uint64_t w = 0; w < words; ++w) {
    const uint64_t word = LoadLE64(bytes + 8 * w);
    const uint64_t first = w * r.digits;
    const uint32_t count =
        static_cast<uint32_t>(std::min<uint64_t>(r.digits, n - first));
    // A short last word must also be below radix^count: zero padding.
    const uint64_t limit = count == r.digits ? r.word_limit : r.Power(count);
    if (word >= limit) return static_cast<int64_t>(w);
    ForEachDigit(r, word, first, count, emit);
  }
  return -1;
}

// Returns the largest digit, like PackBitFields.
uint32_t PackRadix(const Radix& r, const int32_t* sums, uint64_t n,
                   int32_t offset, uint8_t* out) {
  uint32_t largest = 0;
  for (uint64_t first = 0; first < n; first += r.digits) {
    const uint32_t count =
        static_cast<uint32_t>(std::min<uint64_t>(r.digits, n - first));
    // Horner from the most significant chunk and digit down; every partial
    // value is below the final word, so nothing overflows.
    uint64_t word = 0;
    const uint32_t chunks = (count + r.chunk_digits - 1) / r.chunk_digits;
    for (uint32_t c = chunks; c-- > 0;) {
      const uint32_t start = c * r.chunk_digits;
      const uint32_t end = std::min(count, start + r.chunk_digits);
      uint64_t chunk = 0;
      for (uint32_t j = end; j-- > start;) {
        const uint32_t digit = static_cast<uint32_t>(sums[first + j] + offset);
        largest = std::max(largest, digit);
        chunk = chunk * r.radix + digit;
      }
      word = word * r.chunk_base + chunk;
    }
    StoreLE64(word, out);
    out += 8;
  }
  return largest;
}

// ---------------------------------------------------------------------------

absl::Status CheckSumShape(absl::Span<const uint8_t> packed,
                           uint64_t num_elements, uint32_t num_summands,
                           Layout layout, size_t out_size) {
  if (layout != Layout::kSumBits && layout != Layout::kSumRadix &&
      layout != Layout::kSumHuffman) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layout %s is not a sum layout", LayoutName(layout)));
  }
  if (!ValidSummands(num_summands)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sum payload has %d summands, want 1 to %d",
                        num_summands, kMaxSummands));
  }
  if (num_elements != out_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sum payload has %d elements, want %d", num_elements, out_size));
  }
  // SUM_HUFFMAN's size depends on the sums; its decoder checks it.
  if (layout == Layout::kSumHuffman) return absl::OkStatus();
  const size_t want = PackedSumBytes(num_elements, num_summands, layout);
  if (packed.size() != want) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s payload of %d elements with %d summands has %d bytes, want %d",
        LayoutName(layout), num_elements, num_summands, packed.size(), want));
  }
  return absl::OkStatus();
}

// Validates `packed` and calls emit(i, sum) for every element; on error,
// some elements may have been emitted. For SUM_BITS, `fast_path` (if not
// null) may handle a prefix first: fast_path(bits, &largest_field) returns
// how many elements (a multiple of 8) it did.
template <typename Emit, typename FastPath = std::nullptr_t>
absl::Status ForEachSum(absl::Span<const uint8_t> packed, uint64_t num_elements,
                        uint32_t num_summands, Layout layout, size_t out_size,
                        Emit&& emit, FastPath&& fast_path = nullptr) {
  absl::Status status =
      CheckSumShape(packed, num_elements, num_summands, layout, out_size);
  if (!status.ok()) return status;
  const int32_t offset = static_cast<int32_t>(num_summands);
  auto emit_sum = [&emit, offset](uint64_t i, uint64_t field) {
    emit(i, static_cast<int32_t>(field) - offset);
  };
  if (layout == Layout::kSumRadix) {
    const int64_t bad_word = ForEachRadixField(
        Radix(num_summands), packed.data(), num_elements, emit_sum);
    if (bad_word >= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "SUM_RADIX payload: word %d is out of range for radix %d", bad_word,
          2 * uint64_t{num_summands} + 1));
    }
    return absl::OkStatus();
  }
  const uint32_t bits = SumBits(num_summands);
  const uint64_t max_field = 2 * uint64_t{num_summands};
  uint64_t largest = 0;
  uint64_t first = 0;
  if constexpr (!std::is_same_v<std::decay_t<FastPath>, std::nullptr_t>) {
    first = fast_path(bits, &largest);
  }
  largest = std::max(largest, DispatchSumBits(bits, [&](auto width) {
                       return ForEachBitField<decltype(width)::value>(
                           packed.data(), packed.size(), first, num_elements,
                           emit_sum);
                     }));
  if (largest > max_field) {
    for (uint64_t i = 0; i < num_elements; ++i) {
      const uint64_t field =
          ReadFieldSafely(packed.data(), packed.size(), i * bits, bits);
      if (field > max_field) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "SUM_BITS payload: field %d of element %d is above 2N = %d", field,
            i, max_field));
      }
    }
  }
  const uint32_t tail_bits = static_cast<uint32_t>(num_elements * bits % 8);
  if (tail_bits != 0 && (packed.back() >> tail_bits) != 0) {
    return absl::InvalidArgumentError(
        "SUM_BITS payload: nonzero padding bits in the last byte");
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t SumBits(uint32_t num_summands) {
  if (!ValidSummands(num_summands)) return 0;
  return SumFieldBits(num_summands);
}

uint32_t SumRadixDigitsPerWord(uint32_t num_summands) {
  if (!ValidSummands(num_summands)) return 0;
  return Radix(num_summands).digits;
}

size_t PackedSumBytes(uint64_t num_elements, uint32_t num_summands,
                      Layout layout) {
  if (!ValidSummands(num_summands)) return 0;
  if (layout == Layout::kSumBits) {
    const uint64_t bits = SumBits(num_summands);
    // Eight elements take exactly `bits` bytes.
    return num_elements / 8 * bits + (num_elements % 8 * bits + 7) / 8;
  }
  if (layout == Layout::kSumRadix) {
    const uint64_t digits = SumRadixDigitsPerWord(num_summands);
    return 8 * (num_elements / digits + (num_elements % digits != 0 ? 1 : 0));
  }
  return 0;
}

void PackSums(absl::Span<const int32_t> sums, uint32_t num_summands,
              Layout layout, absl::Span<uint8_t> out) {
  TERN_KERNEL_CHECK(layout == Layout::kSumBits || layout == Layout::kSumRadix);
  TERN_KERNEL_CHECK(ValidSummands(num_summands));
  TERN_KERNEL_CHECK(out.size() ==
                    PackedSumBytes(sums.size(), num_summands, layout));
  const int32_t offset = static_cast<int32_t>(num_summands);
  uint32_t largest = 0;
  if (layout == Layout::kSumRadix) {
    largest = PackRadix(Radix(num_summands), sums.data(), sums.size(), offset,
                        out.data());
  } else {
    const uint32_t bits = SumBits(num_summands);
    uint64_t first = 0;
#if TERN_KERNELS_X86
    if (bits <= 8 && simd::CpuHasAvx2()) {
      first =
          simd::PackSumBitsAvx2(sums.data(), sums.size(), bits, num_summands,
                                out.data(), out.size(), &largest);
    }
#endif
    largest =
        std::max(largest, DispatchSumBits(bits, [&](auto width) {
                   return PackBitFields<decltype(width)::value>(
                       sums.data(), first, sums.size(), offset, out.data());
                 }));
  }
  // Every sum in [-N, N]: the server only adds validated codes.
  TERN_KERNEL_CHECK(largest <= 2 * num_summands);
}

absl::Status UnpackSums(absl::Span<const uint8_t> packed, uint64_t num_elements,
                        uint32_t num_summands, Layout layout,
                        absl::Span<int32_t> sums) {
  if (layout == Layout::kSumHuffman) {
    absl::Status status =
        CheckSumShape(packed, num_elements, num_summands, layout, sums.size());
    if (!status.ok()) return status;
    return UnpackSumsHuffman(packed, num_summands, sums);
  }
  int32_t* out = sums.data();
  return ForEachSum(packed, num_elements, num_summands, layout, sums.size(),
                    [out](uint64_t i, int32_t sum) { out[i] = sum; });
}

absl::Status DecodeSums(absl::Span<const uint8_t> packed, uint64_t num_elements,
                        uint32_t num_summands, Layout layout, float scaler,
                        absl::Span<float> out) {
  if (!ValidSummands(num_summands)) {
    // Checked again inside; DecodeFactor must not divide by zero first.
    return CheckSumShape(packed, num_elements, num_summands, layout,
                         out.size());
  }
  const float factor = DecodeFactor(scaler, num_summands);
  if (layout == Layout::kSumHuffman) {
    absl::Status status =
        CheckSumShape(packed, num_elements, num_summands, layout, out.size());
    if (!status.ok()) return status;
    return DecodeSumsHuffman(packed, num_summands, factor, out);
  }
  float* values = out.data();
  return ForEachSum(
      packed, num_elements, num_summands, layout, out.size(),
      [values, factor](uint64_t i, int32_t sum) {
        values[i] = DecodeValue(sum, factor);
      },
      [&](uint32_t bits, uint64_t* largest) -> uint64_t {
#if TERN_KERNELS_X86
        if (bits <= 8 && simd::CpuHasAvx2()) {
          uint32_t largest_field = 0;
          const size_t done = simd::DecodeSumBitsAvx2(
              packed.data(), packed.size(), num_elements, bits, num_summands,
              factor, values, &largest_field);
          *largest = largest_field;
          return done;
        }
#endif
        return 0;
      });
}

}  // namespace tern::kernels

#include "kernels/qsgd.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "kernels/kernel_util.h"

namespace tern::kernels {
namespace {

constexpr uint32_t kLanes = 4;  // of the norms' sums (BucketNorms)

bool ValidLevels(uint32_t levels) {
  return levels >= 1 && levels <= kMaxQsgdLevels;
}

double SumOfSquares(const float* bucket, uint64_t length) {
  double lanes[kLanes] = {};
  uint64_t k = 0;
  for (; k + kLanes <= length; k += kLanes) {
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      const double value = bucket[k + lane];
      lanes[lane] += value * value;  // exact: a float squared fits a double
    }
  }
  for (; k < length; ++k) {
    const double value = bucket[k];
    lanes[k % kLanes] += value * value;
  }
  double sum = 0.0;
  for (uint32_t lane = 0; lane < kLanes; ++lane) sum += lanes[lane];
  return sum;
}

}  // namespace

uint32_t QsgdFieldBits(uint32_t levels) {
  if (!ValidLevels(levels)) return 0;
  // 2s + 1 values 0 .. 2s need the bit width of 2s.
  return 32 - static_cast<uint32_t>(__builtin_clz(2 * levels));
}

uint64_t QsgdNumBuckets(uint64_t num_elements, uint64_t bucket_size) {
  return num_elements / bucket_size + (num_elements % bucket_size != 0 ? 1 : 0);
}

size_t QsgdPackedBytes(uint64_t num_elements, uint32_t levels) {
  const uint64_t bits = QsgdFieldBits(levels);
  // Eight fields take exactly `bits` bytes.
  return static_cast<size_t>(num_elements / 8 * bits +
                             (num_elements % 8 * bits + 7) / 8);
}

int32_t QsgdLevel(float value, float norm, uint32_t levels, uint32_t word) {
  if (!(norm > 0.0f)) return 0;
  const float magnitude = std::fabs(value);
  const float s = static_cast<float>(levels);
  const float ratio = magnitude / norm;
  const float x = ratio * s;
  int32_t level = static_cast<int32_t>(levels);
  if (x < s) {
    level = static_cast<int32_t>(x);  // floor: x >= 0
    const float fraction = x - static_cast<float>(level);
    if (UniformFloat(word) < fraction) ++level;
  }
  return value < 0.0f ? -level : level;
}

absl::Status BucketNorms(absl::Span<const float> values, uint64_t bucket_size,
                         absl::Span<float> norms) {
  TERN_KERNEL_CHECK(bucket_size >= 1);
  const uint64_t n = values.size();
  const uint64_t buckets = QsgdNumBuckets(n, bucket_size);
  TERN_KERNEL_CHECK(norms.size() == buckets);
  for (uint64_t b = 0; b < buckets; ++b) {
    const uint64_t begin = b * bucket_size;
    const uint64_t length = std::min(bucket_size, n - begin);
    const double sum = SumOfSquares(values.data() + begin, length);
    // A NaN or an infinity makes the sum NaN or infinite; name the element.
    if (!std::isfinite(sum)) {
      for (uint64_t i = begin; i < begin + length; ++i) {
        if (!std::isfinite(values[i])) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "element %d is %g, want a finite value", i, values[i]));
        }
      }
    }
    const float norm = static_cast<float>(std::sqrt(sum));
    if (!(norm <= std::numeric_limits<float>::max())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the L2 norm %g of bucket %d (elements %d to %d) is above the "
          "float range",
          std::sqrt(sum), b, begin, begin + length - 1));
    }
    norms[b] = norm;
  }
  return absl::OkStatus();
}

void QuantizePackQsgd(absl::Span<const float> values, uint64_t bucket_size,
                      absl::Span<const float> norms, uint32_t levels,
                      const RandomStream& stream, absl::Span<uint8_t> out) {
  const uint64_t n = values.size();
  TERN_KERNEL_CHECK(bucket_size >= 1);
  TERN_KERNEL_CHECK(ValidLevels(levels));
  TERN_KERNEL_CHECK(n <= kMaxQsgdElements);
  TERN_KERNEL_CHECK(norms.size() == QsgdNumBuckets(n, bucket_size));
  TERN_KERNEL_CHECK(out.size() == QsgdPackedBytes(n, levels));
  const uint32_t bits = QsgdFieldBits(levels);
  const int32_t offset = static_cast<int32_t>(levels);
  uint8_t* bytes = out.data();
  uint64_t pending = 0;  // bits not yet written, LSB first
  uint32_t pending_bits = 0;
  PhiloxCounter words{};
  for (uint64_t b = 0; b < norms.size(); ++b) {
    const float norm = norms[b];
    const uint64_t end = std::min(n, (b + 1) * bucket_size);
    for (uint64_t i = b * bucket_size; i < end; ++i) {
      if (i % 4 == 0) words = RandomWords(stream, static_cast<uint32_t>(i / 4));
      const int32_t level = QsgdLevel(values[i], norm, levels, words.v[i % 4]);
      pending |= static_cast<uint64_t>(level + offset) << pending_bits;
      pending_bits += bits;
      if (pending_bits >= 32) {
        const uint32_t low = static_cast<uint32_t>(pending);
        for (int k = 0; k < 4; ++k) {
          *bytes++ = static_cast<uint8_t>(low >> (8 * k));
        }
        pending >>= 32;
        pending_bits -= 32;
      }
    }
  }
  while (pending_bits > 0) {
    *bytes++ = static_cast<uint8_t>(pending);
    pending >>= 8;
    pending_bits -= std::min(pending_bits, 8u);
  }
}

absl::Status DecodeQsgd(absl::Span<const uint8_t> packed, uint64_t bucket_size,
                        uint32_t levels, absl::Span<const float> norms,
                        absl::Span<float> out) {
  const uint64_t n = out.size();
  if (bucket_size == 0) {
    return absl::InvalidArgumentError("QSGD_LEVELS payload: bucket_size is 0");
  }
  if (!ValidLevels(levels)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("QSGD_LEVELS payload: %d levels, want 1 to %d", levels,
                        kMaxQsgdLevels));
  }
  const uint64_t buckets = QsgdNumBuckets(n, bucket_size);
  if (norms.size() != buckets) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "QSGD_LEVELS payload of %d elements in buckets of %d has %d norms, "
        "want %d",
        n, bucket_size, norms.size(), buckets));
  }
  for (uint64_t b = 0; b < buckets; ++b) {
    if (!std::isfinite(norms[b]) || norms[b] < 0.0f) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "QSGD_LEVELS payload: norm of bucket %d is %g, want a finite value "
          ">= 0",
          b, norms[b]));
    }
  }
  const size_t want = QsgdPackedBytes(n, levels);
  if (packed.size() != want) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "QSGD_LEVELS payload of %d elements with %d levels has %d bytes of "
        "fields, want %d",
        n, levels, packed.size(), want));
  }
  const uint32_t bits = QsgdFieldBits(levels);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const uint64_t max_field = 2 * uint64_t{levels};
  const int32_t offset = static_cast<int32_t>(levels);
  // Bytes are read one at a time as fields need them: the length check
  // above keeps every read inside `packed`.
  const uint8_t* bytes = packed.data();
  uint64_t pending = 0;
  uint32_t pending_bits = 0;
  float* values = out.data();
  for (uint64_t b = 0; b < buckets; ++b) {
    const double factor =
        static_cast<double>(norms[b]) / static_cast<double>(levels);
    const uint64_t end = std::min(n, (b + 1) * bucket_size);
    for (uint64_t i = b * bucket_size; i < end; ++i) {
      while (pending_bits < bits) {
        pending |= static_cast<uint64_t>(*bytes++) << pending_bits;
        pending_bits += 8;
      }
      const uint64_t field = pending & mask;
      pending >>= bits;
      pending_bits -= bits;
      if (field > max_field) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "QSGD_LEVELS payload: field %d of element %d is above 2s = %d",
            field, i, max_field));
      }
      const int32_t level = static_cast<int32_t>(field) - offset;
      values[i] = static_cast<float>(factor * level);
    }
  }
  // What is left of the last byte read is its padding.
  if (pending != 0) {
    return absl::InvalidArgumentError(
        "QSGD_LEVELS payload: nonzero padding bits in the last byte");
  }
  return absl::OkStatus();
}

}  // namespace tern::kernels

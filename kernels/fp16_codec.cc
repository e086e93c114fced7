#include "kernels/fp16_codec.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "kernels/float_aggregation.h"
#include "kernels/fp16_math.h"
#include "kernels/kernel_util.h"
#include "kernels/payload_checks.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TERN_FP16_F16C 1
#else
#define TERN_FP16_F16C 0
#endif

namespace tern::kernels {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "LAYOUT_RAW is little-endian; these copies assume the host is");

#if TERN_FP16_F16C
// F16C converts eight values per instruction with the same results as
// fp16_math.h, NaN payloads included (fp16_test.cc checks every half and
// every rounding midpoint against it), so it is used where the CPU has it.
// Rounding comes from the immediate, not from MXCSR; DAZ/FTZ cannot matter
// because float subnormals become +-0 either way and half subnormals are
// float normals.
__attribute__((target("avx,f16c"))) size_t ToHalfF16c(const float* in, size_t n,
                                                      uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + 2 * i),
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t ToFloatF16c(const uint8_t* in,
                                                       size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(
                         reinterpret_cast<const __m128i*>(in + 2 * i))));
  }
  return i;
}
#endif  // TERN_FP16_F16C

void ToHalf(const float* in, size_t n, uint8_t* out) {
  size_t i = 0;
#if TERN_FP16_F16C
  if (CpuHasF16c()) i = ToHalfF16c(in, n, out);
#endif
  for (; i < n; ++i) {
    const uint16_t half = FloatToHalf(in[i]);
    std::memcpy(out + 2 * i, &half, 2);
  }
}

void ToFloat(const uint8_t* in, size_t n, float* out) {
  size_t i = 0;
#if TERN_FP16_F16C
  if (CpuHasF16c()) i = ToFloatF16c(in, n, out);
#endif
  for (; i < n; ++i) {
    uint16_t half;
    std::memcpy(&half, in + 2 * i, 2);
    out[i] = HalfToFloat(half);
  }
}

Payload MakePayload(absl::Span<const float> values, uint32_t num_summands) {
  Payload payload;
  payload.codec = CodecId::kFp16;
  payload.layout = Layout::kRaw;
  payload.num_elements = values.size();
  payload.num_summands = num_summands;
  ToHalf(values.data(), values.size(),
         ResizeData(&payload, values.size() * 2).data());
  return payload;
}

absl::Status DecodeFp16(const Payload& payload, absl::Span<float> out) {
  absl::Status status = CheckPayloadHeader(payload, CodecId::kFp16, out.size());
  if (status.ok()) status = CheckScalers(payload, 0);
  if (!status.ok()) return status;
  if (payload.layout != Layout::kRaw) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "fp16 payload has layout %s, want RAW", LayoutName(payload.layout)));
  }
  if (payload.num_summands == 0) {
    return absl::InvalidArgumentError("fp16 payload has 0 summands");
  }
  if (payload.data.size() != out.size() * 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("fp16 payload of %d elements has %d bytes, want %d",
                        out.size(), payload.data.size(), out.size() * 2));
  }
  ToFloat(DataBytes(payload).data(), out.size(), out.data());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Payload> Fp16Codec::Encode(absl::Span<const float> values,
                                          const EncodeContext&) const {
  return MakePayload(values, 1);
}

absl::Status Fp16Codec::Decode(const Payload& payload,
                               absl::Span<float> out) const {
  return DecodeFp16(payload, out);
}

std::unique_ptr<Aggregation> Fp16Codec::NewAggregation(
    uint64_t num_elements, uint32_t num_workers,
    const AggregationContext& /*context*/) const {
  return NewDenseAggregation(num_elements, num_workers, DecodeFp16, MakePayload);
}

}  // namespace tern::kernels

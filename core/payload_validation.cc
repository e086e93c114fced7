#include "core/payload_validation.h"

#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "kernels/payload_checks.h"

namespace tern::core {
namespace {

constexpr absl::string_view kNonFinite =
    "(NaN/Inf gradients are refused; see server/README.md)";

constexpr absl::string_view kTooLarge =
    "(the magnitude rule: no value or scaler a peer sends may exceed 1e30 in "
    "magnitude, far beyond any sane run; see global/README.md)";

}  // namespace

bool WithinMagnitude(float value) {
  // False for NaN too: every comparison with NaN is false.
  return std::fabs(value) <= kMaxMagnitude;
}

absl::Status CheckMagnitude(absl::string_view what, float value) {
  if (WithinMagnitude(value)) return absl::OkStatus();
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", value, " ", kNonFinite));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is ", value, ", beyond ", kMaxMagnitude, " ", kTooLarge));
}

size_t FirstBeyondMagnitude(absl::Span<const float> values) {
  const float* v = values.data();
  const size_t n = values.size();
  size_t i = 0;
#if defined(__SSE2__)
  // |x| > bound, or unordered (NaN): cmpnle is true for both.
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 bound = _mm_set1_ps(kMaxMagnitude);
  auto beyond = [&](size_t at) {
    return _mm_cmpnle_ps(_mm_and_ps(_mm_loadu_ps(v + at), abs_mask), bound);
  };
  for (; i + 16 <= n; i += 16) {
    const __m128 any = _mm_or_ps(_mm_or_ps(beyond(i), beyond(i + 4)),
                                 _mm_or_ps(beyond(i + 8), beyond(i + 12)));
    if (_mm_movemask_ps(any) != 0) break;  // the scalar loop finds which
  }
#endif
  for (; i < n; ++i) {
    if (!WithinMagnitude(v[i])) return i;
  }
  return n;
}

absl::Status ValidatePayload(const kernels::Payload& payload,
                             const PayloadExpectation& expect) {
  auto invalid = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (payload.codec != expect.codec) {
    return invalid("codec ", kernels::CodecName(payload.codec),
                   ", but the chunk travels as ",
                   kernels::CodecName(expect.codec));
  }
  if (expect.layout != kernels::Layout::kUnspecified &&
      payload.layout != expect.layout) {
    return invalid("layout ", kernels::LayoutName(payload.layout),
                   ", but the run sends the chunk as ",
                   kernels::LayoutName(expect.layout));
  }
  if (payload.format_version != kernels::kFormatVersion) {
    return invalid("format version ", payload.format_version,
                   " is not supported (", expect.reader, " reads ",
                   kernels::kFormatVersion, ")");
  }
  if (payload.num_elements != expect.num_elements) {
    return invalid(payload.num_elements, " elements, but the chunk has ",
                   expect.num_elements);
  }
  if (expect.single_summand && payload.num_summands != 1) {
    return invalid("num_summands ", payload.num_summands, ", but ",
                   expect.message, " holds one ", expect.sender, "'s values");
  }
  for (const float scaler : payload.scalers) {
    if (!std::isfinite(scaler)) {
      return invalid("scaler ", scaler, " is not finite ", kNonFinite);
    }
    // A scaler is a magnitude of the values it scales: the same bound.
    if (absl::Status status = CheckMagnitude("scaler", scaler); !status.ok()) {
      return status;
    }
  }
  if (expect.shared_scaler.has_value()) {
    const float shared = *expect.shared_scaler;
    if (payload.scalers.size() != 1 || payload.scalers[0] != shared) {
      return invalid("scaler ",
                     payload.scalers.empty()
                         ? std::string("(none)")
                         : absl::StrCat(payload.scalers[0]),
                     " differs from the shared scaler ", shared,
                     " of this step");
    }
    // A shared scaler is a magnitude: one, finite, >= 0 (the kernels' own
    // header rule, kernels/payload_checks.h).
    if (absl::Status status = kernels::CheckScalers(payload, 1);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeFinite(const kernels::Codec& codec,
                          const kernels::Payload& payload,
                          absl::Span<float> out) {
  if (absl::Status status = codec.Decode(payload, out); !status.ok()) {
    return absl::InvalidArgumentError(status.message());
  }
  const size_t j = FirstBeyondMagnitude(out);
  if (j == out.size()) return absl::OkStatus();
  return CheckMagnitude(absl::StrCat("element ", j), out[j]);
}

}  // namespace tern::core

// LAYOUT_SUM_BITS's field width, written once for the CPU (terngrad_sums_cpu)
// and CUDA (terngrad_sums_gpu.cu) sums: a sum of N ternary codes travels as
// sum + N, a value in 0 .. 2N, in the bit width of 2N. Both devices compile
// one loop per width, so that shifts and masks are constants;
// DispatchSumBits turns the runtime width into that template argument.
#ifndef TERN_KERNELS_SUM_BITS_H_
#define TERN_KERNELS_SUM_BITS_H_

#include <cstdint>
#include <type_traits>

#include "kernels/ternary_math.h"

namespace tern::kernels {

// The bit width of 2N: 2 for N = 1 ... 26 for N = kMaxSummands.
constexpr uint32_t SumFieldBits(uint32_t num_summands) {
  uint32_t bits = 0;
  for (uint64_t top = 2 * uint64_t{num_summands}; top != 0; top >>= 1) ++bits;
  return bits;
}

inline constexpr uint32_t kMinSumBits = SumFieldBits(1);
inline constexpr uint32_t kMaxSumBits = SumFieldBits(kMaxSummands);
static_assert(kMinSumBits == 2 && kMaxSumBits == 26);

// Returns fn(std::integral_constant<uint32_t, B>()) with B = bits. `bits`
// must be in [kMinSumBits, kMaxSumBits] (callers check it); a width beyond
// is handed over as kMaxSumBits.
template <uint32_t B = kMinSumBits, typename Fn>
auto DispatchSumBits(uint32_t bits, Fn&& fn) {
  if constexpr (B == kMaxSumBits) {
    return fn(std::integral_constant<uint32_t, B>());
  } else {
    if (bits == B) return fn(std::integral_constant<uint32_t, B>());
    return DispatchSumBits<B + 1>(bits, fn);
  }
}

}  // namespace tern::kernels

#endif  // TERN_KERNELS_SUM_BITS_H_

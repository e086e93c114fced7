// Internal to kernels/: the SIMD inner loops of the TernGrad encoder and the
// lane layout they share with the portable code in terngrad_cpu.cc. Each
// variant produces exactly the bits of the scalar definition in
// ternary_math.h and terngrad.h (terngrad_test.cc checks every variant the
// machine can run), so which one runs changes only the speed.
//
// The x86 variants are compiled with per-function target attributes and
// picked at run time, so the build needs no -m flags: SSE2 is part of
// x86-64; AVX2 and AVX-512F are used when the CPU has them.
#ifndef TERN_KERNELS_TERNGRAD_SIMD_H_
#define TERN_KERNELS_TERNGRAD_SIMD_H_

#include <cstddef>
#include <cstdint>

#include "common/philox.h"
#include "kernels/ternary_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TERN_KERNELS_X86 1
#else
#define TERN_KERNELS_X86 0
#endif

namespace tern::kernels::simd {

// The running per-lane statistics of one ComputeStats block (see
// ChunkStats for the order they define).
struct StatsLanes {
  float sum[kStatsLanes];
  float sum_squares[kStatsLanes];
  float max_abs[kStatsLanes];
  uint32_t nonfinite[kStatsLanes];
};

#if TERN_KERNELS_X86

inline constexpr size_t kSimdBlock = 128;

// True when this CPU (and OS) can run the AVX2 (AVX-512F) variants.
bool CpuHasAvx2();
bool CpuHasAvx512();

// The encoder loops take `values` starting at element 4 * first_group of
// the chunk, a scaler that is positive and finite and a clip bound in
// (0, scaler] (Ternarize(g, bound, scaler, word)), and return how many
// leading elements they handled: a multiple of kSimdBlock (possibly 0, and
// the same count for every variant). The caller finishes the rest with the
// scalar code.
//
// Two-bit: writes one byte per 4 elements (LAYOUT_TERNARY_2BIT).
size_t TwoBitSse2(const float* values, size_t n, uint32_t first_group,
                  float bound, float scaler, const RandomStream& stream,
                  uint8_t* out);
size_t TwoBitAvx2(const float* values, size_t n, uint32_t first_group,
                  float bound, float scaler, const RandomStream& stream,
                  uint8_t* out);
size_t TwoBitAvx512(const float* values, size_t n, uint32_t first_group,
                    float bound, float scaler, const RandomStream& stream,
                    uint8_t* out);

// Base-3: writes one digit (code + 1, in {0, 1, 2}) per element, for the
// caller to pack five to a byte.
size_t Base3DigitsSse2(const float* values, size_t n, uint32_t first_group,
                       float bound, float scaler, const RandomStream& stream,
                       uint8_t* digits);
size_t Base3DigitsAvx2(const float* values, size_t n, uint32_t first_group,
                       float bound, float scaler, const RandomStream& stream,
                       uint8_t* digits);
size_t Base3DigitsAvx512(const float* values, size_t n, uint32_t first_group,
                         float bound, float scaler, const RandomStream& stream,
                         uint8_t* digits);

// LAYOUT_SUM_BITS decode for widths of at most 8 bits (N <= 127): writes
// out[i] = DecodeValue(field_i - N, factor) for whole groups of 8 elements
// (`bits` bytes each) while 8-byte reads stay inside the `size` bytes at
// `packed`, raises *max_field to the largest field seen, and returns the
// number of elements handled (a multiple of 8).
size_t DecodeSumBitsAvx2(const uint8_t* packed, size_t size, uint64_t n,
                         uint32_t bits, uint32_t num_summands, float factor,
                         float* out, uint32_t* max_field);

// LAYOUT_SUM_BITS pack for widths of at most 8 bits: writes the fields
// sums[i] + N of whole groups of 8 elements while 8-byte stores stay inside
// the `size` bytes at `out` (a group's store spills into the next group's
// bytes, which that group then overwrites), raises *max_field to the
// largest field, and returns the number of elements handled (a multiple
// of 8).
size_t PackSumBitsAvx2(const int32_t* sums, uint64_t n, uint32_t bits,
                       uint32_t num_summands, uint8_t* out, size_t size,
                       uint32_t* max_field);

// Adds elements [0, n) to `lanes`, element i going to lane i % kStatsLanes;
// n must be a multiple of kStatsLanes and values[0] must sit in lane 0.
void AccumulateStatsSse2(const float* values, size_t n, float shift,
                         StatsLanes* lanes);
void AccumulateStatsAvx2(const float* values, size_t n, float shift,
                         StatsLanes* lanes);
void AccumulateStatsAvx512(const float* values, size_t n, float shift,
                           StatsLanes* lanes);

#endif  // TERN_KERNELS_X86

}  // namespace tern::kernels::simd

#endif  // TERN_KERNELS_TERNGRAD_SIMD_H_

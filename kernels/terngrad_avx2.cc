// AVX2 inner loops of the TernGrad encoder (see terngrad_simd.h), compiled
// with a per-function target attribute and called only when
// CpuHasAvx2(). Same structure as terngrad_sse2.cc with eight Philox
// instances per vector; two independent sets are interleaved so the
// multiply latency overlaps.
//
// AVX2 shuffles work inside 128-bit halves, so the gradient is loaded with
// row r (elements 4r .. 4r+3) in the low half and row r + 4 in the high
// half of vector r; a 4x4 transpose inside each half then puts element
// 4l + j in lane l of vector j, matching the Philox words of instance l.
#include "kernels/terngrad_simd.h"

#if TERN_KERNELS_X86

#include <immintrin.h>

#include <algorithm>

#include "kernels/kernel_util.h"

#define TERN_AVX2 __attribute__((target("avx2")))
#define TERN_AVX2_INLINE __attribute__((target("avx2"), always_inline)) inline

namespace tern::kernels::simd {
namespace {

struct Constants {
  __m256i m0, m1;
  __m256i keys[10][2];
  __m256i counter1, counter2, counter3;  // chunk, worker, step
  __m256 bound, scaler, abs_mask, max_finite, to_unit;
  __m256i one;
};

TERN_AVX2_INLINE Constants MakeConstants(float bound, float scaler,
                                         const RandomStream& stream) {
  Constants k;
  k.m0 = _mm256_set1_epi32(static_cast<int>(philox_internal::kM0));
  k.m1 = _mm256_set1_epi32(static_cast<int>(philox_internal::kM1));
  for (uint32_t round = 0; round < 10; ++round) {
    const PhiloxKey key =
        philox_internal::RoundKey(SeedKey(stream.seed), round);
    k.keys[round][0] = _mm256_set1_epi32(static_cast<int>(key.v[0]));
    k.keys[round][1] = _mm256_set1_epi32(static_cast<int>(key.v[1]));
  }
  k.counter1 = _mm256_set1_epi32(static_cast<int>(stream.chunk));
  k.counter2 = _mm256_set1_epi32(static_cast<int>(stream.worker));
  k.counter3 = _mm256_set1_epi32(static_cast<int>(stream.step));
  k.bound = _mm256_set1_ps(bound);
  k.scaler = _mm256_set1_ps(scaler);
  k.abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  k.max_finite = _mm256_set1_ps(kMaxFiniteFloat);
  k.to_unit = _mm256_set1_ps(1.0f / 16777216.0f);
  k.one = _mm256_set1_epi32(1);
  return k;
}

// hi and lo halves of the eight 32x32 -> 64-bit products m * c.
TERN_AVX2_INLINE void MulHiLo(__m256i m, __m256i c, __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(c, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(c, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

struct Words {
  __m256i w[4];
};

TERN_AVX2_INLINE void Round(const Constants& k, int round, Words* s) {
  __m256i hi0, lo0, hi1, lo1;
  MulHiLo(k.m0, s->w[0], &hi0, &lo0);
  MulHiLo(k.m1, s->w[2], &hi1, &lo1);
  s->w[0] = _mm256_xor_si256(_mm256_xor_si256(hi1, s->w[1]), k.keys[round][0]);
  s->w[2] = _mm256_xor_si256(_mm256_xor_si256(hi0, s->w[3]), k.keys[round][1]);
  s->w[1] = lo1;
  s->w[3] = lo0;
}

// Instances group .. group+7 into `a` and group+8 .. group+15 into `b`.
TERN_AVX2_INLINE void Philox2(const Constants& k, uint32_t group, Words* a,
                              Words* b) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  a->w[0] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(group)), lanes);
  b->w[0] =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(group + 8)), lanes);
  a->w[1] = b->w[1] = k.counter1;
  a->w[2] = b->w[2] = k.counter2;
  a->w[3] = b->w[3] = k.counter3;
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    Round(k, round, a);
    Round(k, round, b);
  }
}

TERN_AVX2_INLINE void Transpose(__m256* r0, __m256* r1, __m256* r2,
                                __m256* r3) {
  const __m256 t0 = _mm256_unpacklo_ps(*r0, *r1);
  const __m256 t1 = _mm256_unpackhi_ps(*r0, *r1);
  const __m256 t2 = _mm256_unpacklo_ps(*r2, *r3);
  const __m256 t3 = _mm256_unpackhi_ps(*r2, *r3);
  *r0 = _mm256_castpd_ps(
      _mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
  *r1 = _mm256_castpd_ps(
      _mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
  *r2 = _mm256_castpd_ps(
      _mm256_unpacklo_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
  *r3 = _mm256_castpd_ps(
      _mm256_unpackhi_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
}

struct Gradient {
  __m256 g[4];
};

// g[j] lane l = element 4l + j of the 32 at `values`.
TERN_AVX2_INLINE Gradient LoadTransposed(const float* values) {
  Gradient x;
  for (int r = 0; r < 4; ++r) {
    x.g[r] = _mm256_insertf128_ps(
        _mm256_castps128_ps256(_mm_loadu_ps(values + 4 * r)),
        _mm_loadu_ps(values + 16 + 4 * r), 1);
  }
  Transpose(&x.g[0], &x.g[1], &x.g[2], &x.g[3]);
  return x;
}

TERN_AVX2_INLINE __m256i Keep(const Constants& k, __m256i word, __m256 g) {
  const __m256 u =
      _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(word, 8)), k.to_unit);
  const __m256 a = _mm256_and_ps(g, k.abs_mask);
  const __m256 p = _mm256_div_ps(_mm256_min_ps(a, k.bound), k.scaler);
  return _mm256_castps_si256(
      _mm256_and_ps(_mm256_cmp_ps(u, p, _CMP_LT_OQ),
                    _mm256_cmp_ps(a, k.max_finite, _CMP_LE_OQ)));
}

TERN_AVX2_INLINE __m256i TwoBitBytes(const Constants& k, const Words& words,
                                     const Gradient& x) {
  __m256i bytes = _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) {
    const __m256i sign = _mm256_srli_epi32(_mm256_castps_si256(x.g[j]), 31);
    const __m256i field = _mm256_and_si256(Keep(k, words.w[j], x.g[j]),
                                           _mm256_add_epi32(sign, k.one));
    bytes = _mm256_or_si256(bytes, _mm256_slli_epi32(field, 2 * j));
  }
  return bytes;
}

TERN_AVX2_INLINE __m256i Base3Bytes(const Constants& k, const Words& words,
                                    const Gradient& x) {
  __m256 digits[4];
  for (int j = 0; j < 4; ++j) {
    const __m256i signed_one = _mm256_or_si256(
        _mm256_srai_epi32(_mm256_castps_si256(x.g[j]), 31), k.one);
    digits[j] = _mm256_castsi256_ps(_mm256_add_epi32(
        k.one, _mm256_and_si256(Keep(k, words.w[j], x.g[j]), signed_one)));
  }
  // Back to rows: low halves hold rows 0..3, high halves rows 4..7, and the
  // in-half packs then give elements 0..15 and 16..31 in order.
  Transpose(&digits[0], &digits[1], &digits[2], &digits[3]);
  const __m256i rows01 = _mm256_packs_epi32(_mm256_castps_si256(digits[0]),
                                            _mm256_castps_si256(digits[1]));
  const __m256i rows23 = _mm256_packs_epi32(_mm256_castps_si256(digits[2]),
                                            _mm256_castps_si256(digits[3]));
  return _mm256_packus_epi16(rows01, rows23);
}

}  // namespace

bool CpuHasAvx2() { return __builtin_cpu_supports("avx2"); }

TERN_AVX2 size_t TwoBitAvx2(const float* values, size_t n, uint32_t first_group,
                            float bound, float scaler,
                            const RandomStream& stream, uint8_t* out) {
  const Constants k = MakeConstants(bound, scaler, stream);
  // After the packs below, 32-bit element e of the vector holds bytes
  // 4e' .. 4e'+3 for e' = this permutation of e.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const size_t end = n / kSimdBlock * kSimdBlock;
  for (size_t i = 0; i < end; i += 64) {
    Words a, b;
    Philox2(k, first_group + static_cast<uint32_t>(i / 4), &a, &b);
    const __m256i bytes_a = TwoBitBytes(k, a, LoadTransposed(values + i));
    const __m256i bytes_b = TwoBitBytes(k, b, LoadTransposed(values + i + 32));
    // Halves: [a0..a3 b0..b3 | a4..a7 b4..b7] as 16-bit, then bytes.
    const __m256i words16 = _mm256_packs_epi32(bytes_a, bytes_b);
    const __m256i bytes = _mm256_permutevar8x32_epi32(
        _mm256_packus_epi16(words16, words16), order);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i / 4),
                     _mm256_castsi256_si128(bytes));
  }
  return end;
}

TERN_AVX2 size_t Base3DigitsAvx2(const float* values, size_t n,
                                 uint32_t first_group, float bound,
                                 float scaler, const RandomStream& stream,
                                 uint8_t* digits) {
  const Constants k = MakeConstants(bound, scaler, stream);
  const size_t end = n / kSimdBlock * kSimdBlock;
  for (size_t i = 0; i < end; i += 64) {
    Words a, b;
    Philox2(k, first_group + static_cast<uint32_t>(i / 4), &a, &b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(digits + i),
                        Base3Bytes(k, a, LoadTransposed(values + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(digits + i + 32),
                        Base3Bytes(k, b, LoadTransposed(values + i + 32)));
  }
  return end;
}

TERN_AVX2 void AccumulateStatsAvx2(const float* values, size_t n, float shift,
                                   StatsLanes* lanes) {
  // Lanes 0..7 and 8..15, the same per-lane arithmetic as the SSE2 loop.
  const __m256 shift_by = _mm256_set1_ps(shift);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 max_finite = _mm256_set1_ps(kMaxFiniteFloat);
  const __m256i one = _mm256_set1_epi32(1);
  __m256 sum[2], squares[2], max_abs[2];
  __m256i nonfinite[2];
  for (int v = 0; v < 2; ++v) {
    sum[v] = _mm256_loadu_ps(lanes->sum + 8 * v);
    squares[v] = _mm256_loadu_ps(lanes->sum_squares + 8 * v);
    max_abs[v] = _mm256_loadu_ps(lanes->max_abs + 8 * v);
    nonfinite[v] = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(lanes->nonfinite + 8 * v));
  }
  for (size_t i = 0; i < n; i += kStatsLanes) {
    for (int v = 0; v < 2; ++v) {
      const __m256 g = _mm256_loadu_ps(values + i + 8 * v);
      const __m256 a = _mm256_and_ps(g, abs_mask);
      const __m256 finite = _mm256_cmp_ps(a, max_finite, _CMP_LE_OQ);
      const __m256 d = _mm256_and_ps(_mm256_sub_ps(g, shift_by), finite);
      sum[v] = _mm256_add_ps(sum[v], d);
      squares[v] = _mm256_add_ps(squares[v], _mm256_mul_ps(d, d));
      max_abs[v] = _mm256_max_ps(max_abs[v], _mm256_and_ps(a, finite));
      nonfinite[v] = _mm256_add_epi32(
          nonfinite[v], _mm256_add_epi32(_mm256_castps_si256(finite), one));
    }
  }
  for (int v = 0; v < 2; ++v) {
    _mm256_storeu_ps(lanes->sum + 8 * v, sum[v]);
    _mm256_storeu_ps(lanes->sum_squares + 8 * v, squares[v]);
    _mm256_storeu_ps(lanes->max_abs + 8 * v, max_abs[v]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes->nonfinite + 8 * v),
                        nonfinite[v]);
  }
}

TERN_AVX2 size_t PackSumBitsAvx2(const int32_t* sums, uint64_t n, uint32_t bits,
                                 uint32_t num_summands, uint8_t* out,
                                 size_t size, uint32_t* max_field) {
  const __m256i offset = _mm256_set1_epi32(static_cast<int>(num_summands));
  const __m256i shifts_low = _mm256_setr_epi64x(0, bits, 2 * bits, 3 * bits);
  const __m256i shifts_high =
      _mm256_setr_epi64x(4 * bits, 5 * bits, 6 * bits, 7 * bits);
  __m256i largest = _mm256_setzero_si256();
  const uint64_t groups =
      size >= 8 ? std::min<uint64_t>(n / 8, (size - 8) / bits + 1) : 0;
  for (uint64_t g = 0; g < groups; ++g) {
    const __m256i fields = _mm256_add_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + 8 * g)),
        offset);
    largest = _mm256_max_epu32(largest, fields);
    // Each field moved to its bit offset in a u64 lane, then all OR-ed.
    const __m256i low = _mm256_sllv_epi64(
        _mm256_cvtepu32_epi64(_mm256_castsi256_si128(fields)), shifts_low);
    const __m256i high = _mm256_sllv_epi64(
        _mm256_cvtepu32_epi64(_mm256_extracti128_si256(fields, 1)),
        shifts_high);
    const __m256i both = _mm256_or_si256(low, high);
    const __m128i half = _mm_or_si128(_mm256_castsi256_si128(both),
                                      _mm256_extracti128_si256(both, 1));
    const uint64_t word = static_cast<uint64_t>(
        _mm_cvtsi128_si64(_mm_or_si128(half, _mm_unpackhi_epi64(half, half))));
    StoreLE64(word, out + g * bits);
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), largest);
  for (const uint32_t lane : lanes) *max_field = std::max(*max_field, lane);
  return 8 * groups;
}

TERN_AVX2 size_t DecodeSumBitsAvx2(const uint8_t* packed, size_t size,
                                   uint64_t n, uint32_t bits,
                                   uint32_t num_summands, float factor,
                                   float* out, uint32_t* max_field) {
  // A group of 8 fields is one 64-bit word; each u64 lane shifts its own
  // field down, and the low dwords of the lanes are gathered into one
  // vector of 8 fields.
  const __m256i shifts_low = _mm256_setr_epi64x(0, bits, 2 * bits, 3 * bits);
  const __m256i shifts_high =
      _mm256_setr_epi64x(4 * bits, 5 * bits, 6 * bits, 7 * bits);
  const __m256i mask = _mm256_set1_epi64x((int64_t{1} << bits) - 1);
  const __m256i low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m256i offset = _mm256_set1_epi32(static_cast<int>(num_summands));
  const __m256 scale = _mm256_set1_ps(factor);
  __m256i largest = _mm256_setzero_si256();
  const uint64_t groups =
      size >= 8 ? std::min<uint64_t>(n / 8, (size - 8) / bits + 1) : 0;
  for (uint64_t g = 0; g < groups; ++g) {
    const __m256i word =
        _mm256_set1_epi64x(static_cast<int64_t>(LoadLE64(packed + g * bits)));
    const __m256i low =
        _mm256_and_si256(_mm256_srlv_epi64(word, shifts_low), mask);
    const __m256i high =
        _mm256_and_si256(_mm256_srlv_epi64(word, shifts_high), mask);
    const __m256i fields =
        _mm256_blend_epi32(_mm256_permutevar8x32_epi32(low, low_dwords),
                           _mm256_permutevar8x32_epi32(high, low_dwords), 0xF0);
    largest = _mm256_max_epu32(largest, fields);
    _mm256_storeu_ps(
        out + 8 * g,
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(fields, offset)),
                      scale));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), largest);
  for (const uint32_t lane : lanes) *max_field = std::max(*max_field, lane);
  return 8 * groups;
}

}  // namespace tern::kernels::simd

#endif  // TERN_KERNELS_X86

// SSE2 inner loops of the TernGrad encoder (see terngrad_simd.h). SSE2 is
// part of x86-64, so these need no target attribute and no run-time check.
//
// Philox4x32-10 runs on four instances at once, one per 32-bit lane, two
// independent sets interleaved so the multiply latency overlaps. Instance l
// yields the words of elements 4l .. 4l+3, so word vector j holds elements
// 4l + j; the gradient is loaded as rows of four and transposed to match.
#include "kernels/terngrad_simd.h"

#if TERN_KERNELS_X86

#include <emmintrin.h>

#include <cstring>

namespace tern::kernels::simd {
namespace {

// Per-call constants: the Philox multipliers and round keys (the same for
// every block of a chunk) and the ternarization constants.
struct Constants {
  __m128i m0, m1;
  __m128i keys[10][2];
  __m128i counter1, counter2, counter3;  // chunk, worker, step
  __m128 bound, scaler, abs_mask, max_finite, to_unit;
  __m128i one;
};

Constants MakeConstants(float bound, float scaler, const RandomStream& stream) {
  Constants k;
  k.m0 = _mm_set1_epi32(static_cast<int>(philox_internal::kM0));
  k.m1 = _mm_set1_epi32(static_cast<int>(philox_internal::kM1));
  for (uint32_t round = 0; round < 10; ++round) {
    const PhiloxKey key =
        philox_internal::RoundKey(SeedKey(stream.seed), round);
    k.keys[round][0] = _mm_set1_epi32(static_cast<int>(key.v[0]));
    k.keys[round][1] = _mm_set1_epi32(static_cast<int>(key.v[1]));
  }
  k.counter1 = _mm_set1_epi32(static_cast<int>(stream.chunk));
  k.counter2 = _mm_set1_epi32(static_cast<int>(stream.worker));
  k.counter3 = _mm_set1_epi32(static_cast<int>(stream.step));
  k.bound = _mm_set1_ps(bound);
  k.scaler = _mm_set1_ps(scaler);
  k.abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  k.max_finite = _mm_set1_ps(kMaxFiniteFloat);
  k.to_unit = _mm_set1_ps(1.0f / 16777216.0f);
  k.one = _mm_set1_epi32(1);
  return k;
}

// hi and lo halves of the four 32x32 -> 64-bit products m * c.
inline void MulHiLo(__m128i m, __m128i c, __m128i* hi, __m128i* lo) {
  const __m128i even = _mm_mul_epu32(c, m);                     // lanes 0, 2
  const __m128i odd = _mm_mul_epu32(_mm_srli_epi64(c, 32), m);  // lanes 1, 3
  // even = [lo0 hi0 lo2 hi2], odd = [lo1 hi1 lo3 hi3] as 32-bit lanes.
  const __m128i e = _mm_shuffle_epi32(even, _MM_SHUFFLE(3, 1, 2, 0));
  const __m128i o = _mm_shuffle_epi32(odd, _MM_SHUFFLE(3, 1, 2, 0));
  *lo = _mm_unpacklo_epi32(e, o);
  *hi = _mm_unpackhi_epi32(e, o);
}

// Words of instances group .. group+3, as in philox.h's Philox4x32_10 and
// RandomWords; w[j] lane l is word j of instance group + l.
struct Words {
  __m128i w[4];
};

inline void Round(const Constants& k, int round, Words* s) {
  __m128i hi0, lo0, hi1, lo1;
  MulHiLo(k.m0, s->w[0], &hi0, &lo0);
  MulHiLo(k.m1, s->w[2], &hi1, &lo1);
  s->w[0] = _mm_xor_si128(_mm_xor_si128(hi1, s->w[1]), k.keys[round][0]);
  s->w[2] = _mm_xor_si128(_mm_xor_si128(hi0, s->w[3]), k.keys[round][1]);
  s->w[1] = lo1;
  s->w[3] = lo0;
}

// Instances group .. group+3 into `a` and group+4 .. group+7 into `b`.
inline void Philox2(const Constants& k, uint32_t group, Words* a, Words* b) {
  const __m128i lanes = _mm_setr_epi32(0, 1, 2, 3);
  a->w[0] = _mm_add_epi32(_mm_set1_epi32(static_cast<int>(group)), lanes);
  b->w[0] = _mm_add_epi32(_mm_set1_epi32(static_cast<int>(group + 4)), lanes);
  a->w[1] = b->w[1] = k.counter1;
  a->w[2] = b->w[2] = k.counter2;
  a->w[3] = b->w[3] = k.counter3;
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    Round(k, round, a);
    Round(k, round, b);
  }
}

inline void Transpose(__m128* r0, __m128* r1, __m128* r2, __m128* r3) {
  const __m128 t0 = _mm_unpacklo_ps(*r0, *r1);
  const __m128 t1 = _mm_unpackhi_ps(*r0, *r1);
  const __m128 t2 = _mm_unpacklo_ps(*r2, *r3);
  const __m128 t3 = _mm_unpackhi_ps(*r2, *r3);
  *r0 = _mm_movelh_ps(t0, t2);
  *r1 = _mm_movehl_ps(t2, t0);
  *r2 = _mm_movelh_ps(t1, t3);
  *r3 = _mm_movehl_ps(t3, t1);
}

// g[j] lane l = element 4l + j of the 16 at `values`.
struct Gradient {
  __m128 g[4];
};

inline Gradient LoadTransposed(const float* values) {
  Gradient x{{_mm_loadu_ps(values), _mm_loadu_ps(values + 4),
              _mm_loadu_ps(values + 8), _mm_loadu_ps(values + 12)}};
  Transpose(&x.g[0], &x.g[1], &x.g[2], &x.g[3]);
  return x;
}

// All-ones where the element's Bernoulli draw is 1 (Ternarize()).
inline __m128i Keep(const Constants& k, __m128i word, __m128 g) {
  const __m128 u =
      _mm_mul_ps(_mm_cvtepi32_ps(_mm_srli_epi32(word, 8)), k.to_unit);
  const __m128 a = _mm_and_ps(g, k.abs_mask);
  const __m128 p = _mm_div_ps(_mm_min_ps(a, k.bound), k.scaler);
  return _mm_castps_si128(
      _mm_and_ps(_mm_cmplt_ps(u, p), _mm_cmple_ps(a, k.max_finite)));
}

// The byte values (in 32-bit lanes) of the 16 elements' 2-bit fields.
inline __m128i TwoBitBytes(const Constants& k, const Words& words,
                           const Gradient& x) {
  __m128i bytes = _mm_setzero_si128();
  for (int j = 0; j < 4; ++j) {
    const __m128i sign = _mm_srli_epi32(_mm_castps_si128(x.g[j]), 31);
    const __m128i field =
        _mm_and_si128(Keep(k, words.w[j], x.g[j]), _mm_add_epi32(sign, k.one));
    bytes = _mm_or_si128(bytes, _mm_slli_epi32(field, 2 * j));
  }
  return bytes;
}

// The 16 elements' base-3 digits as bytes, in element order.
inline __m128i Base3Bytes(const Constants& k, const Words& words,
                          const Gradient& x) {
  __m128 digits[4];
  for (int j = 0; j < 4; ++j) {
    // +1 or -1 where kept, by the sign bit; the digit is 1 + that.
    const __m128i signed_one =
        _mm_or_si128(_mm_srai_epi32(_mm_castps_si128(x.g[j]), 31), k.one);
    digits[j] = _mm_castsi128_ps(_mm_add_epi32(
        k.one, _mm_and_si128(Keep(k, words.w[j], x.g[j]), signed_one)));
  }
  Transpose(&digits[0], &digits[1], &digits[2], &digits[3]);
  const __m128i rows01 =
      _mm_packs_epi32(_mm_castps_si128(digits[0]), _mm_castps_si128(digits[1]));
  const __m128i rows23 =
      _mm_packs_epi32(_mm_castps_si128(digits[2]), _mm_castps_si128(digits[3]));
  return _mm_packus_epi16(rows01, rows23);
}

}  // namespace

size_t TwoBitSse2(const float* values, size_t n, uint32_t first_group,
                  float bound, float scaler, const RandomStream& stream,
                  uint8_t* out) {
  const Constants k = MakeConstants(bound, scaler, stream);
  const size_t end = n / kSimdBlock * kSimdBlock;
  for (size_t i = 0; i < end; i += 32) {
    Words a, b;
    Philox2(k, first_group + static_cast<uint32_t>(i / 4), &a, &b);
    const __m128i bytes_a = TwoBitBytes(k, a, LoadTransposed(values + i));
    const __m128i bytes_b = TwoBitBytes(k, b, LoadTransposed(values + i + 16));
    const __m128i words16 = _mm_packs_epi32(bytes_a, bytes_b);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i / 4),
                     _mm_packus_epi16(words16, words16));
  }
  return end;
}

size_t Base3DigitsSse2(const float* values, size_t n, uint32_t first_group,
                       float bound, float scaler, const RandomStream& stream,
                       uint8_t* digits) {
  const Constants k = MakeConstants(bound, scaler, stream);
  const size_t end = n / kSimdBlock * kSimdBlock;
  for (size_t i = 0; i < end; i += 32) {
    Words a, b;
    Philox2(k, first_group + static_cast<uint32_t>(i / 4), &a, &b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(digits + i),
                     Base3Bytes(k, a, LoadTransposed(values + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(digits + i + 16),
                     Base3Bytes(k, b, LoadTransposed(values + i + 16)));
  }
  return end;
}

void AccumulateStatsSse2(const float* values, size_t n, float shift,
                         StatsLanes* lanes) {
  const __m128 shift_by = _mm_set1_ps(shift);
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  const __m128 max_finite = _mm_set1_ps(kMaxFiniteFloat);
  __m128 sum[4], squares[4], max_abs[4];
  __m128i nonfinite[4];
  for (int v = 0; v < 4; ++v) {
    sum[v] = _mm_loadu_ps(lanes->sum + 4 * v);
    squares[v] = _mm_loadu_ps(lanes->sum_squares + 4 * v);
    max_abs[v] = _mm_loadu_ps(lanes->max_abs + 4 * v);
    nonfinite[v] = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(lanes->nonfinite + 4 * v));
  }
  for (size_t i = 0; i < n; i += kStatsLanes) {
    for (int v = 0; v < 4; ++v) {
      const __m128 g = _mm_loadu_ps(values + i + 4 * v);
      const __m128 a = _mm_and_ps(g, abs_mask);
      const __m128 finite = _mm_cmple_ps(a, max_finite);
      // Non-finite elements add +0, as the scalar definition does.
      const __m128 d = _mm_and_ps(_mm_sub_ps(g, shift_by), finite);
      sum[v] = _mm_add_ps(sum[v], d);
      squares[v] = _mm_add_ps(squares[v], _mm_mul_ps(d, d));
      max_abs[v] = _mm_max_ps(max_abs[v], _mm_and_ps(a, finite));
      // The mask is -1 where finite: count the others.
      nonfinite[v] = _mm_add_epi32(
          nonfinite[v],
          _mm_add_epi32(_mm_castps_si128(finite), _mm_set1_epi32(1)));
    }
  }
  for (int v = 0; v < 4; ++v) {
    _mm_storeu_ps(lanes->sum + 4 * v, sum[v]);
    _mm_storeu_ps(lanes->sum_squares + 4 * v, squares[v]);
    _mm_storeu_ps(lanes->max_abs + 4 * v, max_abs[v]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes->nonfinite + 4 * v),
                     nonfinite[v]);
  }
}

}  // namespace tern::kernels::simd

#endif  // TERN_KERNELS_X86

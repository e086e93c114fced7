// AVX-512 inner loops of the TernGrad encoder (see terngrad_simd.h) and of
// the chunk statistics, compiled with a per-function target attribute and
// called only when CpuHasAvx512(). The encoder runs 32 Philox instances per
// 128 elements as four sets of eight in 64-bit lanes (see Set), then joins
// them into sixteen 32-bit lanes per vector, as terngrad_avx2.cc has eight.
//
// Where the time goes (AMD EPYC, 2^20 floats in cache): the Philox rounds
// alone run at about 0.3 of memcpy, and their 80 vpmuludq per 128 elements
// alone, at one per cycle, would cap the encoder near 0.6; the
// ternarization and packing below cost about as much again.
//
// Shuffles work inside 128-bit blocks, so the 64 values of a set are first
// rearranged so that block q of vector r holds row r + 4q (elements
// 4(r+4q) .. +3); the 4x4 transpose inside each block then puts element
// 4l + j in lane l of vector j, matching the words of instance l.
#include "kernels/terngrad_simd.h"

#if TERN_KERNELS_X86

// GCC 12 warns about _mm512_undefined_epi32() inside its own intrinsics'
// headers once they are inlined here; the warning is about the header.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#define TERN_AVX512 __attribute__((target("avx512f")))
#define TERN_AVX512_INLINE \
  __attribute__((target("avx512f"), always_inline)) inline

namespace tern::kernels::simd {
namespace {

struct Constants {
  __m512i m0, m1;
  __m512i keys[10][2];
  __m512i counter1, counter2, counter3;  // chunk, worker, step
  __m512 bound, scaler, max_finite, to_unit;
  __m512i one;
};

TERN_AVX512_INLINE Constants MakeConstants(float bound, float scaler,
                                           const RandomStream& stream) {
  Constants k;
  k.m0 = _mm512_set1_epi32(static_cast<int>(philox_internal::kM0));
  k.m1 = _mm512_set1_epi32(static_cast<int>(philox_internal::kM1));
  for (uint32_t round = 0; round < 10; ++round) {
    const PhiloxKey key =
        philox_internal::RoundKey(SeedKey(stream.seed), round);
    k.keys[round][0] = _mm512_set1_epi32(static_cast<int>(key.v[0]));
    k.keys[round][1] = _mm512_set1_epi32(static_cast<int>(key.v[1]));
  }
  k.counter1 = _mm512_set1_epi32(static_cast<int>(stream.chunk));
  k.counter2 = _mm512_set1_epi32(static_cast<int>(stream.worker));
  k.counter3 = _mm512_set1_epi32(static_cast<int>(stream.step));
  k.bound = _mm512_set1_ps(bound);
  k.scaler = _mm512_set1_ps(scaler);
  k.max_finite = _mm512_set1_ps(kMaxFiniteFloat);
  k.to_unit = _mm512_set1_ps(1.0f / 16777216.0f);
  k.one = _mm512_set1_epi32(1);
  return k;
}

// Philox with each instance's 32-bit words in the low halves of 64-bit
// lanes (eight instances per vector): _mm512_mul_epu32 then gives the whole
// 64-bit product of each lane, hi and lo with one shift, and the junk that
// builds up in the high halves never reaches a low half (the multiply reads
// only the low halves; xor is bitwise). Six instructions per round for
// eight instances, where splitting even and odd 32-bit lanes took sixteen
// for sixteen.
struct Set {
  __m512i w0, w1, w2, w3;
};

TERN_AVX512_INLINE Set StartSet(const Constants& k, uint32_t group) {
  // Counter word 0 of eight instances: group + 0..7 in the low halves (the
  // 32-bit add wraps as the scalar counter does).
  const __m512i lanes =
      _mm512_setr_epi32(0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0);
  return Set{
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(group)), lanes),
      k.counter1, k.counter2, k.counter3};
}

TERN_AVX512_INLINE void Round(const Constants& k, int round, Set& s) {
  const __m512i p0 = _mm512_mul_epu32(s.w0, k.m0);
  const __m512i p1 = _mm512_mul_epu32(s.w2, k.m1);
  // 0x96: a ^ b ^ c.
  s.w0 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p1, 32), s.w1,
                                   k.keys[round][0], 0x96);
  s.w2 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p0, 32), s.w3,
                                   k.keys[round][1], 0x96);
  s.w1 = p1;
  s.w3 = p0;
}

// Word j of sixteen instances, lane l = instance l: the low halves of two
// sets side by side.
TERN_AVX512_INLINE __m512i Join(__m512i first, __m512i second) {
  const __m512i low_halves = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16,
                                               18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_epi32(first, low_halves, second);
}

struct Words {
  __m512i w0, w1, w2, w3;
};

// Instances group .. group+15 into `a` and group+16 .. group+31 into `b`
// (word j of instance group + l in lane l of wj): four sets of eight, so
// the multiplies of one round overlap.
TERN_AVX512_INLINE void Philox2(const Constants& k, uint32_t group, Words* a,
                                Words* b) {
  Set s0 = StartSet(k, group);
  Set s1 = StartSet(k, group + 8);
  Set s2 = StartSet(k, group + 16);
  Set s3 = StartSet(k, group + 24);
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    Round(k, round, s0);
    Round(k, round, s1);
    Round(k, round, s2);
    Round(k, round, s3);
  }
  *a = Words{Join(s0.w0, s1.w0), Join(s0.w1, s1.w1), Join(s0.w2, s1.w2),
             Join(s0.w3, s1.w3)};
  *b = Words{Join(s2.w0, s3.w0), Join(s2.w1, s3.w1), Join(s2.w2, s3.w2),
             Join(s2.w3, s3.w3)};
}

// 4x4 transpose of 32-bit elements inside each 128-bit block.
TERN_AVX512_INLINE void Transpose(__m512i& r0, __m512i& r1, __m512i& r2,
                                  __m512i& r3) {
  const __m512i t0 = _mm512_unpacklo_epi32(r0, r1);
  const __m512i t1 = _mm512_unpackhi_epi32(r0, r1);
  const __m512i t2 = _mm512_unpacklo_epi32(r2, r3);
  const __m512i t3 = _mm512_unpackhi_epi32(r2, r3);
  r0 = _mm512_unpacklo_epi64(t0, t2);
  r1 = _mm512_unpackhi_epi64(t0, t2);
  r2 = _mm512_unpacklo_epi64(t1, t3);
  r3 = _mm512_unpackhi_epi64(t1, t3);
}

struct Gradient {
  __m512i g0, g1, g2, g3;  // float bits
};

// gj lane l = element 4l + j of the 64 at `values`.
TERN_AVX512_INLINE Gradient LoadTransposed(const float* values) {
  // z[k] block q = row 4k + q; we want v[r] block q = row r + 4q: a 4x4
  // transpose of blocks, done with two rounds of block shuffles.
  const __m512i z0 = _mm512_castps_si512(_mm512_loadu_ps(values));
  const __m512i z1 = _mm512_castps_si512(_mm512_loadu_ps(values + 16));
  const __m512i z2 = _mm512_castps_si512(_mm512_loadu_ps(values + 32));
  const __m512i z3 = _mm512_castps_si512(_mm512_loadu_ps(values + 48));
  const __m512i a = _mm512_shuffle_i32x4(z0, z1, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i b = _mm512_shuffle_i32x4(z0, z1, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i c = _mm512_shuffle_i32x4(z2, z3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i d = _mm512_shuffle_i32x4(z2, z3, _MM_SHUFFLE(3, 2, 3, 2));
  // a = [z0.0 z0.1 z1.0 z1.1], c = [z2.0 z2.1 z3.0 z3.1], etc.
  Gradient x{_mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(2, 0, 2, 0)),
             _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(3, 1, 3, 1)),
             _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(2, 0, 2, 0)),
             _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(3, 1, 3, 1))};
  Transpose(x.g0, x.g1, x.g2, x.g3);
  return x;
}

// Lanes whose Bernoulli draw is 1 (Ternarize()).
TERN_AVX512_INLINE __mmask16 Keep(const Constants& k, __m512i word, __m512i g) {
  const __m512 u =
      _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(word, 8)), k.to_unit);
  const __m512 a =
      _mm512_castsi512_ps(_mm512_and_si512(g, _mm512_set1_epi32(0x7FFFFFFF)));
  const __m512 p = _mm512_div_ps(_mm512_min_ps(a, k.bound), k.scaler);
  return _mm512_cmp_ps_mask(u, p, _CMP_LT_OQ) &
         _mm512_cmp_ps_mask(a, k.max_finite, _CMP_LE_OQ);
}

// The two-bit field of element 4l + j in bits 2j, 2j+1 of lane l: 01 for
// a kept positive value, 10 for a kept negative one, 00 where not kept.
template <int j>
TERN_AVX512_INLINE __m512i Field(const Constants& k, __m512i word, __m512i g) {
  const __m512i negative = _mm512_srai_epi32(g, 31);  // all ones or zero
  // 0xCA: a ? b : c, bit by bit; zero where not kept.
  return _mm512_maskz_ternarylogic_epi32(Keep(k, word, g), negative,
                                         _mm512_set1_epi32(2 << (2 * j)),
                                         _mm512_set1_epi32(1 << (2 * j)), 0xCA);
}

TERN_AVX512_INLINE __m128i TwoBitBytes(const Constants& k, const Words& words,
                                       const Gradient& x) {
  // 0xFE: a | b | c.
  const __m512i bytes = _mm512_or_si512(
      _mm512_ternarylogic_epi32(Field<0>(k, words.w0, x.g0),
                                Field<1>(k, words.w1, x.g1),
                                Field<2>(k, words.w2, x.g2), 0xFE),
      Field<3>(k, words.w3, x.g3));
  return _mm512_cvtepi32_epi8(bytes);
}

// The base-3 digit (1, plus or minus 1 where kept, by the sign) of each
// lane, as bytes.
TERN_AVX512_INLINE __m128i Digits(const Constants& k, __m512i word, __m512i g) {
  const __m512i signed_one = _mm512_or_si512(_mm512_srai_epi32(g, 31), k.one);
  return _mm512_cvtepi32_epi8(
      _mm512_mask_add_epi32(k.one, Keep(k, word, g), k.one, signed_one));
}

// The 64 digits in element order.
TERN_AVX512_INLINE void StoreBase3Digits(const Constants& k, const Words& words,
                                         const Gradient& x, uint8_t* digits) {
  // dj byte l = digit of element 4l + j: interleave the four.
  const __m128i d0 = Digits(k, words.w0, x.g0);
  const __m128i d1 = Digits(k, words.w1, x.g1);
  const __m128i d2 = Digits(k, words.w2, x.g2);
  const __m128i d3 = Digits(k, words.w3, x.g3);
  const __m128i d01_low = _mm_unpacklo_epi8(d0, d1);
  const __m128i d01_high = _mm_unpackhi_epi8(d0, d1);
  const __m128i d23_low = _mm_unpacklo_epi8(d2, d3);
  const __m128i d23_high = _mm_unpackhi_epi8(d2, d3);
  __m128i* out = reinterpret_cast<__m128i*>(digits);
  _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(d01_low, d23_low));
  _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(d01_low, d23_low));
  _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(d01_high, d23_high));
  _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(d01_high, d23_high));
}

}  // namespace

TERN_AVX512 void AccumulateStatsAvx512(const float* values, size_t n,
                                       float shift, StatsLanes* lanes) {
  // All sixteen lanes in one vector, the same per-lane arithmetic as the
  // SSE2 and AVX2 loops: d = g - shift; sum += d; square = d * d rounded on
  // its own; sum_squares += square. The empty asm keeps the square a value
  // of its own, so the compiler cannot contract it and the add into an FMA
  // (which rounds once, and would change the bits).
  const __m512 shift_by = _mm512_set1_ps(shift);
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512 max_finite = _mm512_set1_ps(kMaxFiniteFloat);
  const __m512i one = _mm512_set1_epi32(1);
  __m512 sum = _mm512_loadu_ps(lanes->sum);
  __m512 squares = _mm512_loadu_ps(lanes->sum_squares);
  __m512 max_abs = _mm512_loadu_ps(lanes->max_abs);
  __m512i nonfinite = _mm512_loadu_si512(lanes->nonfinite);
  for (size_t i = 0; i < n; i += kStatsLanes) {
    const __m512 g = _mm512_loadu_ps(values + i);
    const __m512 a =
        _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(g), abs_mask));
    const __mmask16 finite = _mm512_cmp_ps_mask(a, max_finite, _CMP_LE_OQ);
    const __m512 d = _mm512_maskz_sub_ps(finite, g, shift_by);
    sum = _mm512_add_ps(sum, d);
    __m512 square = _mm512_mul_ps(d, d);
    asm("" : "+v"(square));
    squares = _mm512_add_ps(squares, square);
    max_abs = _mm512_mask_max_ps(max_abs, finite, max_abs, a);
    nonfinite = _mm512_mask_add_epi32(nonfinite, ~finite, nonfinite, one);
  }
  _mm512_storeu_ps(lanes->sum, sum);
  _mm512_storeu_ps(lanes->sum_squares, squares);
  _mm512_storeu_ps(lanes->max_abs, max_abs);
  _mm512_storeu_si512(lanes->nonfinite, nonfinite);
}

bool CpuHasAvx512() { return __builtin_cpu_supports("avx512f"); }

TERN_AVX512 size_t TwoBitAvx512(const float* values, size_t n,
                                uint32_t first_group, float bound, float scaler,
                                const RandomStream& stream, uint8_t* out) {
  const Constants k = MakeConstants(bound, scaler, stream);
  const size_t end = n / kSimdBlock * kSimdBlock;
  for (size_t i = 0; i < end; i += 128) {
    Words a, b;
    Philox2(k, first_group + static_cast<uint32_t>(i / 4), &a, &b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i / 4),
                     TwoBitBytes(k, a, LoadTransposed(values + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i / 4 + 16),
                     TwoBitBytes(k, b, LoadTransposed(values + i + 64)));
  }
  return end;
}

TERN_AVX512 size_t Base3DigitsAvx512(const float* values, size_t n,
                                     uint32_t first_group, float bound,
                                     float scaler, const RandomStream& stream,
                                     uint8_t* digits) {
  const Constants k = MakeConstants(bound, scaler, stream);
  const size_t end = n / kSimdBlock * kSimdBlock;
  for (size_t i = 0; i < end; i += 128) {
    Words a, b;
    Philox2(k, first_group + static_cast<uint32_t>(i / 4), &a, &b);
    StoreBase3Digits(k, a, LoadTransposed(values + i), digits + i);
    StoreBase3Digits(k, b, LoadTransposed(values + i + 64), digits + i + 64);
  }
  return end;
}

}  // namespace tern::kernels::simd

#endif  // TERN_KERNELS_X86

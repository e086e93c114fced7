// AVX-512 inner loops of the TernGrad encoder (see terngrad_simd.h),
// compiled with a per-function target attribute and called only when
// CpuHasAvx512(). Same structure as terngrad_avx2.cc with sixteen Philox
// instances per vector, two sets interleaved.
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
  uint32_t key0 = static_cast<uint32_t>(stream.seed);
  uint32_t key1 = static_cast<uint32_t>(stream.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    k.keys[round][0] = _mm512_set1_epi32(static_cast<int>(key0));
    k.keys[round][1] = _mm512_set1_epi32(static_cast<int>(key1));
    key0 += philox_internal::kW0;
    key1 += philox_internal::kW1;
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

struct Words {
  __m512i w[4];
};

TERN_AVX512_INLINE void Round(const Constants& k, int round, Words* s) {
  constexpr __mmask16 kOdd = 0xAAAA;
  const __m512i even0 = _mm512_mul_epu32(s->w[0], k.m0);
  const __m512i odd0 = _mm512_mul_epu32(_mm512_srli_epi64(s->w[0], 32), k.m0);
  const __m512i even1 = _mm512_mul_epu32(s->w[2], k.m1);
  const __m512i odd1 = _mm512_mul_epu32(_mm512_srli_epi64(s->w[2], 32), k.m1);
  const __m512i hi0 =
      _mm512_mask_mov_epi32(_mm512_srli_epi64(even0, 32), kOdd, odd0);
  const __m512i lo0 =
      _mm512_mask_mov_epi32(even0, kOdd, _mm512_slli_epi64(odd0, 32));
  const __m512i hi1 =
      _mm512_mask_mov_epi32(_mm512_srli_epi64(even1, 32), kOdd, odd1);
  const __m512i lo1 =
      _mm512_mask_mov_epi32(even1, kOdd, _mm512_slli_epi64(odd1, 32));
  // 0x96: a ^ b ^ c.
  s->w[0] = _mm512_ternarylogic_epi32(hi1, s->w[1], k.keys[round][0], 0x96);
  s->w[2] = _mm512_ternarylogic_epi32(hi0, s->w[3], k.keys[round][1], 0x96);
  s->w[1] = lo1;
  s->w[3] = lo0;
}

// Instances group .. group+15 into `a` and group+16 .. group+31 into `b`.
TERN_AVX512_INLINE void Philox2(const Constants& k, uint32_t group, Words* a,
                                Words* b) {
  const __m512i lanes =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  a->w[0] = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(group)), lanes);
  b->w[0] =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(group + 16)), lanes);
  a->w[1] = b->w[1] = k.counter1;
  a->w[2] = b->w[2] = k.counter2;
  a->w[3] = b->w[3] = k.counter3;
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    Round(k, round, a);
    Round(k, round, b);
  }
}

// 4x4 transpose of 32-bit elements inside each 128-bit block.
TERN_AVX512_INLINE void Transpose(__m512i* r0, __m512i* r1, __m512i* r2,
                                  __m512i* r3) {
  const __m512i t0 = _mm512_unpacklo_epi32(*r0, *r1);
  const __m512i t1 = _mm512_unpackhi_epi32(*r0, *r1);
  const __m512i t2 = _mm512_unpacklo_epi32(*r2, *r3);
  const __m512i t3 = _mm512_unpackhi_epi32(*r2, *r3);
  *r0 = _mm512_unpacklo_epi64(t0, t2);
  *r1 = _mm512_unpackhi_epi64(t0, t2);
  *r2 = _mm512_unpacklo_epi64(t1, t3);
  *r3 = _mm512_unpackhi_epi64(t1, t3);
}

struct Gradient {
  __m512i g[4];  // float bits
};

// g[j] lane l = element 4l + j of the 64 at `values`.
TERN_AVX512_INLINE Gradient LoadTransposed(const float* values) {
  // z[k] block q = row 4k + q; we want v[r] block q = row r + 4q: a 4x4
  // transpose of blocks, done with two rounds of block shuffles.
  __m512i z[4];
  for (int k = 0; k < 4; ++k) {
    z[k] = _mm512_castps_si512(_mm512_loadu_ps(values + 16 * k));
  }
  const __m512i a = _mm512_shuffle_i32x4(z[0], z[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i b = _mm512_shuffle_i32x4(z[0], z[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i c = _mm512_shuffle_i32x4(z[2], z[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i d = _mm512_shuffle_i32x4(z[2], z[3], _MM_SHUFFLE(3, 2, 3, 2));
  // a = [z0.0 z0.1 z1.0 z1.1], c = [z2.0 z2.1 z3.0 z3.1], etc.
  Gradient x{{_mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(2, 0, 2, 0)),
              _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(3, 1, 3, 1)),
              _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(2, 0, 2, 0)),
              _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(3, 1, 3, 1))}};
  Transpose(&x.g[0], &x.g[1], &x.g[2], &x.g[3]);
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

TERN_AVX512_INLINE __m128i TwoBitBytes(const Constants& k, const Words& words,
                                       const Gradient& x) {
  __m512i bytes = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) {
    const __m512i field = _mm512_maskz_add_epi32(
        Keep(k, words.w[j], x.g[j]), _mm512_srli_epi32(x.g[j], 31), k.one);
    bytes = _mm512_or_si512(bytes, _mm512_slli_epi32(field, 2 * j));
  }
  return _mm512_cvtepi32_epi8(bytes);
}

// The 64 digits in element order.
TERN_AVX512_INLINE void StoreBase3Digits(const Constants& k, const Words& words,
                                         const Gradient& x, uint8_t* digits) {
  __m128i d[4];
  for (int j = 0; j < 4; ++j) {
    // 1, plus or minus 1 where kept by the sign.
    const __m512i signed_one =
        _mm512_or_si512(_mm512_srai_epi32(x.g[j], 31), k.one);
    d[j] = _mm512_cvtepi32_epi8(_mm512_mask_add_epi32(
        k.one, Keep(k, words.w[j], x.g[j]), k.one, signed_one));
  }
  // d[j] byte l = digit of element 4l + j: interleave the four.
  const __m128i d01_low = _mm_unpacklo_epi8(d[0], d[1]);
  const __m128i d01_high = _mm_unpackhi_epi8(d[0], d[1]);
  const __m128i d23_low = _mm_unpacklo_epi8(d[2], d[3]);
  const __m128i d23_high = _mm_unpackhi_epi8(d[2], d[3]);
  __m128i* out = reinterpret_cast<__m128i*>(digits);
  _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(d01_low, d23_low));
  _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(d01_low, d23_low));
  _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(d01_high, d23_high));
  _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(d01_high, d23_high));
}

}  // namespace

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

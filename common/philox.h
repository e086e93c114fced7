// Counter-based Philox4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011). Every random draw in tern is a pure function of
// (run seed, step, chunk key, worker id, element index), so draws are
// reproducible, independent of thread count, identical on CPU and GPU, and no
// generator state needs checkpointing (DESIGN section 2).
//
// The header is usable from CUDA: every function is __host__ __device__ when
// compiled by nvcc, and plain inline C++ otherwise.
#ifndef TERN_COMMON_PHILOX_H_
#define TERN_COMMON_PHILOX_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TERN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TERN_HOST_DEVICE inline
#endif

namespace tern {

struct PhiloxCounter {
  uint32_t v[4];
};
struct PhiloxKey {
  uint32_t v[2];
};

namespace philox_internal {
// Multipliers and Weyl constants from the Random123 reference.
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;

TERN_HOST_DEVICE void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi,
                              uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

// The key of round `round` (0 to 9): each word bumped by its Weyl constant
// once a round (wrapping). The SIMD encoders hold all ten in registers.
TERN_HOST_DEVICE PhiloxKey RoundKey(PhiloxKey key, uint32_t round) {
  return PhiloxKey{{key.v[0] + round * kW0, key.v[1] + round * kW1}};
}

TERN_HOST_DEVICE PhiloxCounter Round(PhiloxCounter c, PhiloxKey k) {
  uint32_t hi0, lo0, hi1, lo1;
  MulHiLo(kM0, c.v[0], &hi0, &lo0);
  MulHiLo(kM1, c.v[2], &hi1, &lo1);
  return PhiloxCounter{{hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
}
}  // namespace philox_internal

// Philox4x32 with 10 rounds: the variant whose published known-answer
// vectors (Random123 kat_vectors) the tests check.
TERN_HOST_DEVICE PhiloxCounter Philox4x32_10(PhiloxCounter counter,
                                             PhiloxKey key) {
  for (uint32_t round = 0; round < 10; ++round) {
    counter = philox_internal::Round(counter,
                                     philox_internal::RoundKey(key, round));
  }
  return counter;
}

// Where a stream of draws lives. One Philox call yields four 32-bit words,
// used for the four consecutive elements 4*g .. 4*g+3 of group g.
struct RandomStream {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t chunk = 0;
  uint32_t worker = 0;
};

// The key of every stream of a run: the 64-bit seed, low word first.
TERN_HOST_DEVICE PhiloxKey SeedKey(uint64_t seed) {
  return PhiloxKey{{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32)}};
}

// The four words for elements [4*group, 4*group + 4) of `stream`.
// Counter layout: (group, chunk, worker, step); key: SeedKey(seed).
TERN_HOST_DEVICE PhiloxCounter RandomWords(const RandomStream& stream,
                                           uint32_t group) {
  const PhiloxCounter counter{{group, stream.chunk, stream.worker, stream.step}};
  return Philox4x32_10(counter, SeedKey(stream.seed));
}

// A uniform float in [0, 1) from the top 24 bits of a word: exactly
// representable, so CPU and GPU agree bit for bit.
TERN_HOST_DEVICE float UniformFloat(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

}  // namespace tern

#endif  // TERN_COMMON_PHILOX_H_

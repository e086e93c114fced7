// The work of one CUDA thread in the TernGrad kernels (terngrad_gpu.cu,
// terngrad_sums_gpu.cu), written as __host__ __device__ functions so the
// host can run exactly the same code: terngrad_tile_gpu_test.cc runs every
// "thread" of a launch on the CPU and compares the bytes with the CPU kernels
// in terngrad.h, on machines without a GPU. On the device, the only
// difference is the memory access (the same values either way): vector
// loads and stores where the addresses are aligned and the tile is whole,
// and, for chunks that start off a 16-byte boundary, tiles that the kernels
// stage through shared memory (StageIn / StageOut below).
//
// Bit-identity with the CPU also needs IEEE division and denormals on the
// device: nvcc's defaults (-prec-div=true, -ftz=false). Never build these
// files with --use_fast_math.
//
// The per-element math is ternary_math.h's (Ternarize, TwoBitField,
// Base3Digit, DecodeFactor, DecodeValue); this header only decides which
// elements a thread owns and how its bytes are laid out
// (proto/tern/v1/payload.proto). Floating-point additions and products that
// must match the CPU bit for bit use the _rn intrinsics on the device, so
// nvcc cannot contract them into fused multiply-adds.
//
// Bounds: every function here reads and writes only inside the element and
// byte counts it is given (a tile that crosses the end of a chunk is cut).
#ifndef TERN_KERNELS_TERNGRAD_TILE_CUDA_H_
#define TERN_KERNELS_TERNGRAD_TILE_CUDA_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/philox.h"
#include "kernels/ternary_math.h"

// Full unrolling of the fixed-size loops for nvcc; the host build (tests)
// leaves them to the compiler.
#if defined(__CUDACC__)
#define TERN_UNROLL _Pragma("unroll")
#else
#define TERN_UNROLL
#endif

namespace tern::kernels::tile {

// Elements per thread. A two-bit thread makes one 32-bit word of codes from
// four Philox groups; a base-3 thread makes four bytes from five groups, so
// no Philox call is made twice (one byte per thread would draw 2 groups for
// 5 elements). A SUM_BITS thread reads the kBits bytes of 8 fields.
inline constexpr uint32_t kTwoBitElements = 16;
inline constexpr uint32_t kBase3Elements = 20;
inline constexpr uint32_t kSumBitsElements = 8;

// A statistics thread owns 4 of the 16 float lanes of one stats block.
inline constexpr uint32_t kStatsLanesPerThread = 4;
inline constexpr uint32_t kStatsThreadsPerBlock =
    kStatsLanes / kStatsLanesPerThread;
static_assert(kStatsLanes == 16 && kStatsBlockSize % kStatsLanes == 0,
              "the stats tiles assume 16 lanes");

// The most radix digits in one 64-bit SUM_RADIX word (N = 1: radix 3).
inline constexpr uint32_t kMaxRadixDigits = 40;

// Validation results, OR-ed per chunk (and per push): what the CPU decoders
// report as INVALID_ARGUMENT.
inline constexpr uint32_t kErrorBadValue = 1;    // 2-bit field 11, base-3
                                                 // byte > 242, sum field
                                                 // > 2N, radix word too big
inline constexpr uint32_t kErrorBadPadding = 2;  // nonzero padding bits

// ---------------------------------------------------------------------------
// Arithmetic that must round like the CPU (no contraction into FMA).

TERN_HOST_DEVICE float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

TERN_HOST_DEVICE float SubRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

TERN_HOST_DEVICE float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

TERN_HOST_DEVICE double AddRn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// The high 64 bits of a * b.
TERN_HOST_DEVICE uint64_t MulHi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

TERN_HOST_DEVICE void FlagError(uint32_t* flags, uint32_t bits) {
#if defined(__CUDA_ARCH__)
  atomicOr(flags, bits);
#else
  *flags |= bits;
#endif
}

TERN_HOST_DEVICE bool IsAligned(const void* pointer, uintptr_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

// ---------------------------------------------------------------------------
// Sizes (the same formulas as PackedTernaryBytes / PackedSumBytes in
// terngrad.h, which the tests compare them with).

TERN_HOST_DEVICE uint64_t TwoBitBytes(uint64_t n) { return (n + 3) / 4; }
TERN_HOST_DEVICE uint64_t Base3Bytes(uint64_t n) { return (n + 4) / 5; }
TERN_HOST_DEVICE uint64_t SumBitsBytes(uint64_t n, uint32_t bits) {
  return n / 8 * bits + (n % 8 * bits + 7) / 8;
}

// ---------------------------------------------------------------------------
// Memory access. Values past `n` (bytes past `size`) read as zero and are
// never written.

// v[j] = values[first + j] for j < kCount.
template <uint32_t kCount>
TERN_HOST_DEVICE void LoadFloats(const float* values, uint64_t first,
                                 uint64_t n, float* v) {
  static_assert(kCount % 4 == 0, "whole float4s");
#if defined(__CUDA_ARCH__)
  if (first + kCount <= n && IsAligned(values + first, 16)) {
    const float4* p = reinterpret_cast<const float4*>(values + first);
    TERN_UNROLL
    for (uint32_t j = 0; j < kCount / 4; ++j) {
      const float4 q = __ldg(p + j);
      v[4 * j] = q.x;
      v[4 * j + 1] = q.y;
      v[4 * j + 2] = q.z;
      v[4 * j + 3] = q.w;
    }
    return;
  }
#endif
  TERN_UNROLL
  for (uint32_t j = 0; j < kCount; ++j) {
    v[j] = first + j < n ? values[first + j] : 0.0f;
  }
}

// out[first + j] = v[j] for first + j < n; T is float or int32_t.
template <uint32_t kCount, typename T>
TERN_HOST_DEVICE void StoreValues(T* out, uint64_t first, uint64_t n,
                                  const T* v) {
  static_assert(kCount % 4 == 0 && sizeof(T) == 4, "whole 16-byte vectors");
#if defined(__CUDA_ARCH__)
  if (first + kCount <= n && IsAligned(out + first, 16)) {
    using Vector = typename std::conditional<std::is_same<T, float>::value,
                                             float4, int4>::type;
    Vector* p = reinterpret_cast<Vector*>(out + first);
    TERN_UNROLL
    for (uint32_t j = 0; j < kCount / 4; ++j) {
      p[j] = Vector{v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]};
    }
    return;
  }
#endif
  TERN_UNROLL
  for (uint32_t j = 0; j < kCount; ++j) {
    if (first + j < n) out[first + j] = v[j];
  }
}

// The little-endian 32-bit word of bytes [index, index + 4).
TERN_HOST_DEVICE uint32_t LoadWordLE(const uint8_t* bytes, uint64_t index,
                                     uint64_t size) {
#if defined(__CUDA_ARCH__)
  if (index + 4 <= size && IsAligned(bytes + index, 4)) {
    return __ldg(reinterpret_cast<const unsigned int*>(bytes + index));
  }
#endif
  uint32_t word = 0;
  for (uint32_t b = 0; b < 4; ++b) {
    if (index + b < size) word |= uint32_t{bytes[index + b]} << (8 * b);
  }
  return word;
}

// The little-endian 64-bit word of bytes [index, index + 8).
TERN_HOST_DEVICE uint64_t LoadWord64LE(const uint8_t* bytes, uint64_t index,
                                       uint64_t size) {
#if defined(__CUDA_ARCH__)
  if (index + 8 <= size && IsAligned(bytes + index, 8)) {
    return __ldg(reinterpret_cast<const unsigned long long*>(bytes + index));
  }
#endif
  uint64_t word = 0;
  for (uint32_t b = 0; b < 8; ++b) {
    if (index + b < size) word |= uint64_t{bytes[index + b]} << (8 * b);
  }
  return word;
}

// Writes the little-endian bytes of `word` to [index, index + 4).
TERN_HOST_DEVICE void StoreWordLE(uint8_t* bytes, uint64_t index, uint64_t size,
                                  uint32_t word) {
#if defined(__CUDA_ARCH__)
  if (index + 4 <= size && IsAligned(bytes + index, 4)) {
    *reinterpret_cast<uint32_t*>(bytes + index) = word;
    return;
  }
#endif
  for (uint32_t b = 0; b < 4; ++b) {
    if (index + b < size)
      bytes[index + b] = static_cast<uint8_t>(word >> (8 * b));
  }
}

// ---------------------------------------------------------------------------
// Chunk statistics (ChunkStats in terngrad.h).
//
// Inside a stats block the order is the CPU's: lane L adds the elements
// i = L (mod 16) of the block in increasing i, d = g - shift, sum += d,
// sum_squares += d * d with the product rounded on its own. One thread
// holds lanes 4q .. 4q+3 for the whole block, so each lane is one sequential
// chain, bit-identical with the CPU's lane.
//
// Above the lanes the GPU order is its own (a sequential double sum over
// all blocks would be a dependency chain of 16 adds per 4096 elements):
// a block's node adds its 16 lanes to a double in lane order, starting from
// 0.0; the chunk's value is the pairwise sum of its block nodes over the
// aligned power-of-two tree that FoldStatsNodes spells out. Counts and the
// largest magnitude are exact in any order.

// The moments' shift: the chunk's first value, or 0 if it is not finite.
TERN_HOST_DEVICE float StatsShift(float first) {
  return fabsf(first) <= kMaxFiniteFloat ? first : 0.0f;
}

// One thread's four lanes.
struct StatsQuarter {
  float sum[kStatsLanesPerThread];
  float sum_squares[kStatsLanesPerThread];
  float max_abs;
  uint32_t nonfinite;
};

// One element into one lane: AddToLane in terngrad_cpu.cc.
TERN_HOST_DEVICE void AddStatsValue(float g, float shift, float* sum,
                                    float* sum_squares, float* max_abs,
                                    uint32_t* nonfinite) {
  const float a = fabsf(g);
  const bool finite = a <= kMaxFiniteFloat;
  const float d = finite ? SubRn(g, shift) : 0.0f;
  *sum = AddRn(*sum, d);
  *sum_squares = AddRn(*sum_squares, MulRn(d, d));
  const float kept = finite ? a : 0.0f;
  if (kept > *max_abs) *max_abs = kept;
  *nonfinite += finite ? 0u : 1u;
}

TERN_HOST_DEVICE void ClearStatsQuarter(StatsQuarter* acc) {
  for (uint32_t j = 0; j < kStatsLanesPerThread; ++j) {
    acc->sum[j] = 0.0f;
    acc->sum_squares[j] = 0.0f;
  }
  acc->max_abs = 0.0f;
  acc->nonfinite = 0;
}

// Rows [first_row, first_row + num_rows) of a stats block of `len`
// elements into lanes 4q .. 4q+3: `rows` holds those rows (16 floats each,
// row first_row first); elements at or past len are skipped.
TERN_HOST_DEVICE void AddStatsRows(const float* rows, uint32_t first_row,
                                   uint32_t num_rows, uint32_t len, uint32_t q,
                                   float shift, StatsQuarter* acc) {
  for (uint32_t r = 0; r < num_rows; ++r) {
    TERN_UNROLL
    for (uint32_t j = 0; j < kStatsLanesPerThread; ++j) {
      const uint32_t lane = q * kStatsLanesPerThread + j;
      if ((first_row + r) * kStatsLanes + lane < len) {
        AddStatsValue(rows[r * kStatsLanes + lane], shift, &acc->sum[j],
                      &acc->sum_squares[j], &acc->max_abs, &acc->nonfinite);
      }
    }
  }
}

// Lanes 4q .. 4q+3 (q < 4) of the stats block of `len` (<= 4096) elements
// at `block`.
TERN_HOST_DEVICE void AccumulateStatsQuarter(const float* block, uint32_t len,
                                             uint32_t q, float shift,
                                             StatsQuarter* acc) {
  ClearStatsQuarter(acc);
#if defined(__CUDA_ARCH__)
  constexpr uint32_t kRows = kStatsBlockSize / kStatsLanes;
  if (len == kStatsBlockSize && IsAligned(block, 16)) {
    // Row r of the block is 16 floats, four float4s; this thread reads
    // float4 number q of every row. Sixteen rows are loaded before any is
    // added: each thread keeps 256 bytes in flight, as the lane chains
    // allow only four threads per 16 KiB block.
    const float4* p = reinterpret_cast<const float4*>(block) + q;
    constexpr uint32_t kUnroll = 16;
    static_assert(kRows % kUnroll == 0, "whole unrolled steps");
    for (uint32_t r0 = 0; r0 < kRows; r0 += kUnroll) {
      float4 v[kUnroll];
      TERN_UNROLL
      for (uint32_t k = 0; k < kUnroll; ++k) v[k] = __ldg(p + 4 * (r0 + k));
      TERN_UNROLL
      for (uint32_t k = 0; k < kUnroll; ++k) {
        AddStatsValue(v[k].x, shift, &acc->sum[0], &acc->sum_squares[0],
                      &acc->max_abs, &acc->nonfinite);
        AddStatsValue(v[k].y, shift, &acc->sum[1], &acc->sum_squares[1],
                      &acc->max_abs, &acc->nonfinite);
        AddStatsValue(v[k].z, shift, &acc->sum[2], &acc->sum_squares[2],
                      &acc->max_abs, &acc->nonfinite);
        AddStatsValue(v[k].w, shift, &acc->sum[3], &acc->sum_squares[3],
                      &acc->max_abs, &acc->nonfinite);
      }
    }
    return;
  }
#endif
  AddStatsRows(block, 0, (len + kStatsLanes - 1) / kStatsLanes, len, q, shift,
               acc);
}

// A node of the statistics tree: one stats block, or a run of them.
struct StatsNode {
  double sum;
  double sum_squares;
  uint64_t nonfinite;
  float max_abs;
};

// The node of one block from its 16 lanes, added in lane order.
TERN_HOST_DEVICE StatsNode StatsBlockNode(const float* lane_sum,
                                          const float* lane_sum_squares,
                                          float max_abs, uint64_t nonfinite) {
  StatsNode node{0.0, 0.0, nonfinite, max_abs};
  for (uint32_t lane = 0; lane < kStatsLanes; ++lane) {
    node.sum = AddRn(node.sum, static_cast<double>(lane_sum[lane]));
    node.sum_squares =
        AddRn(node.sum_squares, static_cast<double>(lane_sum_squares[lane]));
  }
  return node;
}

// left = left + right (left covers the lower block indices).
TERN_HOST_DEVICE void CombineStatsNodes(StatsNode* left,
                                        const StatsNode& right) {
  left->sum = AddRn(left->sum, right.sum);
  left->sum_squares = AddRn(left->sum_squares, right.sum_squares);
  left->nonfinite += right.nonfinite;
  if (right.max_abs > left->max_abs) left->max_abs = right.max_abs;
}

// The definition of the tree: at stride s = 1, 2, 4, ..., node i (a
// multiple of 2s) absorbs node i + s when that exists; the chunk's value
// ends in nodes[0]. Equivalently, the sum over [0, 2^k) is the sum over
// its lower half plus the sum over its upper half, and a half past the last
// block is left out. The kernels evaluate the same tree, the lower levels
// inside a CTA and the upper levels across CTAs.
TERN_HOST_DEVICE void FoldStatsNodes(StatsNode* nodes, uint64_t count) {
  for (uint64_t stride = 1; stride < count; stride *= 2) {
    for (uint64_t i = 0; i + stride < count; i += 2 * stride) {
      CombineStatsNodes(&nodes[i], nodes[i + stride]);
    }
  }
}

// ---------------------------------------------------------------------------
// Ternarize and pack (QuantizePack in terngrad.h).

TERN_HOST_DEVICE bool UsableScaler(float scaler) {
  return scaler > 0.0f && scaler <= kMaxFiniteFloat;
}

// The Philox words of group `group`, or zeros where the result cannot
// depend on them (a scaler Ternarize rejects; a group past the chunk).
TERN_HOST_DEVICE PhiloxCounter GroupWords(const RandomStream& stream,
                                          uint64_t group, bool needed) {
  if (!needed) return PhiloxCounter{{0, 0, 0, 0}};
  return RandomWords(stream, static_cast<uint32_t>(group));
}

// The TERNARY_2BIT word of elements [first, first + 16) of a chunk of n
// values (first a multiple of 16), v holding them (zeros past n), clipped
// at `bound` (ClipBound(clip_bound, scaler), resolved on the host).
TERN_HOST_DEVICE uint32_t TwoBitWord(const float* v, uint64_t first, uint64_t n,
                                     float bound, float scaler,
                                     const RandomStream& stream) {
  const bool usable = UsableScaler(scaler) && bound > 0.0f;
  uint32_t word = 0;
  TERN_UNROLL
  for (uint32_t g = 0; g < kTwoBitElements / 4; ++g) {
    const PhiloxCounter words =
        GroupWords(stream, first / 4 + g, usable && first + 4 * g < n);
    TERN_UNROLL
    for (uint32_t j = 0; j < 4; ++j) {
      // Elements past n are 0.0f, which Ternarize maps to code 0: the
      // zero padding bits of the last byte.
      const int code = Ternarize(v[4 * g + j], bound, scaler, words.v[j]);
      word |= TwoBitField(code) << (2 * (4 * g + j));
    }
  }
  return word;
}

// The four TERNARY_BASE3 bytes (little-endian) of elements [first,
// first + 20), byte b holding elements first + 5b .. first + 5b + 4.
TERN_HOST_DEVICE uint32_t Base3Word(const float* v, uint64_t first, uint64_t n,
                                    float bound, float scaler,
                                    const RandomStream& stream) {
  const bool usable = UsableScaler(scaler) && bound > 0.0f;
  uint32_t digits[kBase3Elements];
  TERN_UNROLL
  for (uint32_t g = 0; g < kBase3Elements / 4; ++g) {
    const PhiloxCounter words =
        GroupWords(stream, first / 4 + g, usable && first + 4 * g < n);
    TERN_UNROLL
    for (uint32_t j = 0; j < 4; ++j) {
      const uint32_t e = 4 * g + j;
      // Padding digits past n are 0 (not the digit 1 of code 0).
      digits[e] = first + e < n
                      ? Base3Digit(Ternarize(v[e], bound, scaler, words.v[j]))
                      : 0u;
    }
  }
  uint32_t word = 0;
  TERN_UNROLL
  for (uint32_t b = 0; b < 4; ++b) {
    const uint32_t* d = digits + 5 * b;
    const uint32_t byte =
        d[0] + 3 * (d[1] + 3 * (d[2] + 3 * (d[3] + 3 * d[4])));
    word |= byte << (8 * b);
  }
  return word;
}

// Thread t of a TERNARY_2BIT encode of the `n` values at `values`:
// elements [16t, 16t + 16) become bytes [4t, 4t + 4) of `out`.
TERN_HOST_DEVICE void QuantizeTwoBitThread(const float* values, uint64_t n,
                                           uint64_t t, float bound,
                                           float scaler,
                                           const RandomStream& stream,
                                           uint8_t* out) {
  const uint64_t first = t * kTwoBitElements;
  float v[kTwoBitElements];
  LoadFloats<kTwoBitElements>(values, first, n, v);
  StoreWordLE(out, 4 * t, TwoBitBytes(n),
              TwoBitWord(v, first, n, bound, scaler, stream));
}

// Thread t of a TERNARY_BASE3 encode: elements [20t, 20t + 20) become
// bytes [4t, 4t + 4).
TERN_HOST_DEVICE void QuantizeBase3Thread(const float* values, uint64_t n,
                                          uint64_t t, float bound, float scaler,
                                          const RandomStream& stream,
                                          uint8_t* out) {
  const uint64_t first = t * kBase3Elements;
  float v[kBase3Elements];
  LoadFloats<kBase3Elements>(values, first, n, v);
  StoreWordLE(out, 4 * t, Base3Bytes(n),
              Base3Word(v, first, n, bound, scaler, stream));
}

// ---------------------------------------------------------------------------
// Sums of ternary pushes (AccumulateTernary in terngrad.h, over N pushes).

// The code of a 2-bit field: 01 -> +1, 10 -> -1, 00 -> 0 (11 is flagged as
// invalid; it adds 0).
TERN_HOST_DEVICE int32_t TwoBitCode(uint32_t field) {
  return static_cast<int32_t>(field & 1u) - static_cast<int32_t>(field >> 1);
}

// Tile t of a sum of `num_pushes` TERNARY_2BIT payloads of `n` elements,
// payload w at pushes[w] + packed_offset: reads bytes [4t, 4t + 4) of each
// into acc[0 .. 16), the sums of elements [16t, 16t + 16). Flags errors of
// push w in errors[w * error_stride].
TERN_HOST_DEVICE void SumTwoBitTile(const uint8_t* const* pushes,
                                    uint32_t num_pushes, uint64_t packed_offset,
                                    uint64_t n, uint64_t t, int32_t* acc,
                                    uint32_t* errors, uint64_t error_stride) {
  const uint64_t size = TwoBitBytes(n);
  const uint64_t index = 4 * t;
  // Which byte of the word is the payload's last (when it has padding).
  const uint32_t used = static_cast<uint32_t>(n % 4);
  const bool has_last = used != 0 && size - 1 - index < 4;
  const uint32_t last_shift = static_cast<uint32_t>(8 * (size - 1 - index));
  TERN_UNROLL
  for (uint32_t j = 0; j < kTwoBitElements; ++j) acc[j] = 0;
  for (uint32_t w = 0; w < num_pushes; ++w) {
    const uint32_t word = LoadWordLE(pushes[w] + packed_offset, index, size);
    uint32_t bad =
        (word & (word >> 1) & 0x55555555u) != 0 ? kErrorBadValue : 0u;
    if (has_last && (((word >> last_shift) & 0xFFu) >> (2 * used)) != 0) {
      bad |= kErrorBadPadding;
    }
    if (bad != 0) FlagError(errors + w * error_stride, bad);
    TERN_UNROLL
    for (uint32_t j = 0; j < kTwoBitElements; ++j) {
      acc[j] += TwoBitCode((word >> (2 * j)) & 3u);
    }
  }
}

// Thread t of that sum: writes sums[16t .. 16t + 16) (overwriting).
TERN_HOST_DEVICE void SumTwoBitThread(const uint8_t* const* pushes,
                                      uint32_t num_pushes,
                                      uint64_t packed_offset, uint64_t n,
                                      uint64_t t, int32_t* sums,
                                      uint32_t* errors, uint64_t error_stride) {
  int32_t acc[kTwoBitElements];
  SumTwoBitTile(pushes, num_pushes, packed_offset, n, t, acc, errors,
                error_stride);
  StoreValues<kTwoBitElements>(sums, t * kTwoBitElements, n, acc);
}

// 3^k for k < 5.
TERN_HOST_DEVICE uint32_t Pow3(uint32_t k) {
  uint32_t power = 1;
  for (uint32_t j = 0; j < k; ++j) power *= 3;
  return power;
}

// Tile t of a sum of TERNARY_BASE3 payloads: bytes [4t, 4t + 4) into
// acc[0 .. 20), the sums of elements [20t, 20t + 20).
TERN_HOST_DEVICE void SumBase3Tile(const uint8_t* const* pushes,
                                   uint32_t num_pushes, uint64_t packed_offset,
                                   uint64_t n, uint64_t t, int32_t* acc,
                                   uint32_t* errors, uint64_t error_stride) {
  const uint64_t size = Base3Bytes(n);
  const uint64_t index = 4 * t;
  const uint32_t used = static_cast<uint32_t>(n % 5);
  // Padding digits must be zero: the last byte is below 3^used.
  const uint32_t last_limit = Pow3(used);
  TERN_UNROLL
  for (uint32_t j = 0; j < kBase3Elements; ++j) acc[j] = 0;
  for (uint32_t w = 0; w < num_pushes; ++w) {
    const uint32_t word = LoadWordLE(pushes[w] + packed_offset, index, size);
    uint32_t bad = 0;
    TERN_UNROLL
    for (uint32_t b = 0; b < 4; ++b) {
      uint32_t byte = (word >> (8 * b)) & 0xFFu;
      if (index + b < size) {
        if (byte > 242) bad |= kErrorBadValue;
        if (used != 0 && index + b == size - 1 && byte >= last_limit) {
          bad |= kErrorBadPadding;
        }
      }
      TERN_UNROLL
      for (uint32_t j = 0; j < 5; ++j) {
        acc[5 * b + j] += static_cast<int32_t>(byte % 3) - 1;
        byte /= 3;
      }
    }
    if (bad != 0) FlagError(errors + w * error_stride, bad);
  }
}

// Thread t of that sum: writes sums[20t .. 20t + 20) (overwriting).
TERN_HOST_DEVICE void SumBase3Thread(const uint8_t* const* pushes,
                                     uint32_t num_pushes,
                                     uint64_t packed_offset, uint64_t n,
                                     uint64_t t, int32_t* sums,
                                     uint32_t* errors, uint64_t error_stride) {
  int32_t acc[kBase3Elements];
  SumBase3Tile(pushes, num_pushes, packed_offset, n, t, acc, errors,
               error_stride);
  StoreValues<kBase3Elements>(sums, t * kBase3Elements, n, acc);
}

// ---------------------------------------------------------------------------
// Decoding pulled sums (DecodeSums in terngrad.h).

// Tile t of a LAYOUT_SUM_BITS decode of `n` sums of `num_summands` codes,
// kBits = SumBits(num_summands) bits each: bytes [t*kBits, t*kBits + kBits)
// hold elements [8t, 8t + 8), whose values go to v[0 .. 8). Returns error
// bits.
template <uint32_t kBits>
TERN_HOST_DEVICE uint32_t DecodeSumBitsTile(const uint8_t* packed, uint64_t n,
                                            uint64_t t, uint32_t num_summands,
                                            float factor, float* v) {
  static_assert(kBits >= 2 && kBits <= 26, "a field spans five bytes at most");
  const uint64_t size = SumBitsBytes(n, kBits);
  const uint64_t index = t * kBits;
  // The group's bytes, each in a register (constant indices only).
  uint32_t bytes[kBits];
  if constexpr (kBits % 4 == 0) {
    TERN_UNROLL
    for (uint32_t k = 0; k < kBits / 4; ++k) {
      const uint32_t word = LoadWordLE(packed, index + 4 * k, size);
      TERN_UNROLL
      for (uint32_t b = 0; b < 4; ++b)
        bytes[4 * k + b] = (word >> (8 * b)) & 0xFFu;
    }
  } else {
    TERN_UNROLL
    for (uint32_t b = 0; b < kBits; ++b) {
      bytes[b] = index + b < size ? uint32_t{packed[index + b]} : 0u;
    }
  }
  const uint32_t max_field = 2 * num_summands;
  const uint64_t first = t * kSumBitsElements;
  uint32_t bad = 0;
  TERN_UNROLL
  for (uint32_t j = 0; j < kSumBitsElements; ++j) {
    // Field j is bits [j*kBits, j*kBits + kBits) of the group: at most five
    // bytes from byte j*kBits/8 on.
    const uint32_t bit = j * kBits;
    uint64_t window = 0;
    TERN_UNROLL
    for (uint32_t k = 0; k < 5; ++k) {
      if (bit / 8 + k < kBits) {
        window |= static_cast<uint64_t>(bytes[bit / 8 + k]) << (8 * k);
      }
    }
    const uint32_t field =
        static_cast<uint32_t>(window >> (bit % 8)) & ((1u << kBits) - 1);
    if (first + j < n && field > max_field) bad |= kErrorBadValue;
    v[j] = DecodeValue(
        static_cast<int32_t>(field) - static_cast<int32_t>(num_summands),
        factor);
  }
  // The bits after the last field, in the last byte, must be zero.
  const uint32_t tail_bits = static_cast<uint32_t>(n * kBits % 8);
  if (tail_bits != 0 && size - 1 - index < kBits) {
    const uint32_t last_byte = static_cast<uint32_t>(size - 1 - index);
    uint32_t last = 0;
    TERN_UNROLL
    for (uint32_t b = 0; b < kBits; ++b) {
      if (b == last_byte) last = bytes[b];
    }
    if ((last >> tail_bits) != 0) bad |= kErrorBadPadding;
  }
  return bad;
}

// Thread t of that decode: writes out[8t .. 8t + 8).
template <uint32_t kBits>
TERN_HOST_DEVICE uint32_t DecodeSumBitsThread(const uint8_t* packed, uint64_t n,
                                              uint64_t t, uint32_t num_summands,
                                              float factor, float* out) {
  float v[kSumBitsElements];
  const uint32_t bad =
      DecodeSumBitsTile<kBits>(packed, n, t, num_summands, factor, v);
  StoreValues<kSumBitsElements>(out, t * kSumBitsElements, n, v);
  return bad;
}

// LAYOUT_SUM_RADIX parameters for N summands: radix R = 2N + 1, `digits`
// per word, a word must be below R^digits; a word is split into chunks of
// `chunk_digits` digits (R^chunk_digits < 2^32), and a chunk into digits
// with q = mulhi(reciprocal, chunk), reciprocal = floor((2^64 - 1) / R) + 1
// (Lemire, Kaser & Kurz 2019: exact for chunk, R < 2^32). The layout is the
// CPU's (terngrad_sums_cpu.cc).
struct RadixParams {
  uint64_t radix;
  uint64_t word_limit;
  uint64_t chunk_base;
  uint64_t reciprocal;
  uint32_t digits;
  uint32_t chunk_digits;
};

TERN_HOST_DEVICE RadixParams MakeRadixParams(uint32_t num_summands) {
  RadixParams r{};
  r.radix = 2 * uint64_t{num_summands} + 1;
  r.word_limit = 1;
  while (r.word_limit <= ~uint64_t{0} / r.radix) {
    r.word_limit *= r.radix;
    ++r.digits;
  }
  r.chunk_base = 1;
  while (r.chunk_base * r.radix <= 0xFFFFFFFFull) {
    r.chunk_base *= r.radix;
    ++r.chunk_digits;
  }
  r.reciprocal = ~uint64_t{0} / r.radix + 1;
  return r;
}

// Word w of a SUM_RADIX payload of `n` sums: writes the values of elements
// [w * digits, w * digits + count) to out[0 .. count) and returns error
// bits (a word at or above R^count, which also catches nonzero padding
// digits in a short last word).
TERN_HOST_DEVICE uint32_t DecodeRadixWord(const uint8_t* packed, uint64_t n,
                                          uint64_t w, const RadixParams& r,
                                          uint32_t num_summands, float factor,
                                          float* out) {
  const uint64_t num_words = (n + r.digits - 1) / r.digits;
  uint64_t word = LoadWord64LE(packed, 8 * w, 8 * num_words);
  const uint64_t first = w * r.digits;
  const uint32_t count =
      static_cast<uint32_t>(n - first < r.digits ? n - first : r.digits);
  uint64_t limit = r.word_limit;
  if (count != r.digits) {
    limit = 1;
    for (uint32_t j = 0; j < count; ++j) limit *= r.radix;
  }
  const uint32_t bad = word >= limit ? kErrorBadValue : 0u;
  const int32_t offset = static_cast<int32_t>(num_summands);
  for (uint32_t start = 0; start < count; start += r.chunk_digits) {
    uint64_t chunk = word;
    if (count - start > r.chunk_digits) {
      chunk = word % r.chunk_base;
      word /= r.chunk_base;
    }
    const uint32_t end =
        count < start + r.chunk_digits ? count : start + r.chunk_digits;
    for (uint32_t j = start; j < end; ++j) {
      const uint64_t quotient = MulHi64(r.reciprocal, chunk);
      const uint64_t digit = chunk - quotient * r.radix;
      out[j] = DecodeValue(static_cast<int32_t>(digit) - offset, factor);
      chunk = quotient;
    }
  }
  return bad;
}

// ---------------------------------------------------------------------------
// Device only: which chunk a CTA works on.

#if defined(__CUDACC__)
// The chunk that owns CTA `cta`: the last c with first_cta[c] <= cta
// (first_cta non-decreasing, first_cta[0] == 0, so empty chunks are skipped).
// A 32-way search: each step the warp probes 32 evenly spaced entries, so a
// table of C chunks takes ceil(log32 C) dependent loads instead of log2 C.
// Must be called by all 32 lanes of a warp.
__device__ __forceinline__ uint32_t FindChunk(const uint32_t* first_cta,
                                              uint32_t num_chunks,
                                              uint32_t cta) {
  const uint32_t lane = threadIdx.x % 32;
  uint32_t lo = 0;
  uint32_t hi = num_chunks;  // the answer is in [lo, hi)
  while (hi - lo > 1) {
    const uint32_t step = (hi - lo + 31) / 32;
    const uint32_t probe = lo + lane * step;
    const bool at_or_before = probe < hi && __ldg(first_cta + probe) <= cta;
    // Lane 0 probes lo, which is at or before cta, so the mask is nonzero;
    // the table is sorted, so the set lanes are a prefix.
    const uint32_t mask = __ballot_sync(0xFFFFFFFFu, at_or_before);
    const uint32_t last = 31 - static_cast<uint32_t>(__clz(mask));
    lo += last * step;
    hi = min(hi, lo + step);
  }
  return lo;
}

// CTA-wide staging through shared memory, for chunks whose addresses rule
// out vector loads or stores: consecutive threads touch consecutive
// elements, so a warp's access is one contiguous 128-byte run whatever the
// alignment, where a thread-per-tile access would stride by the tile.
// stage[i] = src[first + i] for i < kCtaThreads * kPerThread (zero past n).
template <uint32_t kCtaThreads, uint32_t kPerThread, typename T>
__device__ __forceinline__ void StageIn(T* stage, const T* src, uint64_t first,
                                        uint64_t n) {
  TERN_UNROLL
  for (uint32_t k = 0; k < kPerThread; ++k) {
    const uint32_t i = k * kCtaThreads + threadIdx.x;
    stage[i] = first + i < n ? __ldg(src + first + i) : T(0);
  }
}

// dst[first + i] = stage[i] for first + i < n.
template <uint32_t kCtaThreads, uint32_t kPerThread, typename T>
__device__ __forceinline__ void StageOut(const T* stage, T* dst, uint64_t first,
                                         uint64_t n) {
  TERN_UNROLL
  for (uint32_t k = 0; k < kPerThread; ++k) {
    const uint32_t i = k * kCtaThreads + threadIdx.x;
    if (first + i < n) dst[first + i] = stage[i];
  }
}
#endif  // defined(__CUDACC__)

}  // namespace tern::kernels::tile

#endif  // TERN_KERNELS_TERNGRAD_TILE_CUDA_H_

// The per-thread code of the CUDA kernels (terngrad_tile_cuda.h), run on
// the host: every "thread" of a launch is called in turn and the bytes are
// compared with the CPU kernels in terngrad.h. No GPU is needed (this test
// is part of the default build); terngrad_gpu_test.cc runs the same
// comparisons on a device.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/payload.h"
#include "kernels/sum_bits.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels {
namespace {

using tile::StatsNode;

constexpr uint64_t kSizes[] = {0,  1,  3,  4,  5,  15, 16,   17,
                               19, 20, 21, 31, 32, 33, 1000, (1u << 20) + 3};

// Sentinel bytes around every output: a tile must not write outside.
constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;

const RandomStream kStream{
    .seed = 0x0123456789ABCDEFull, .step = 17, .chunk = 3, .worker = 2};

// Normal values with outliers, and (if asked) NaN and infinities.
std::vector<float> Gradient(size_t n, uint32_t seed, bool nonfinite = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = normal(rng) * (i % 101 == 7 ? 40.0f : 1.0f);
    if (nonfinite && i % 257 == 3) {
      g[i] = i % 2 ? std::numeric_limits<float>::infinity()
                   : std::numeric_limits<float>::quiet_NaN();
    }
  }
  return g;
}

// A byte buffer of `size` with guard bytes on both sides.
class Guarded {
 public:
  explicit Guarded(size_t size) : bytes_(size + 2 * kGuard, kGuardByte) {}
  uint8_t* data() { return bytes_.data() + kGuard; }
  std::vector<uint8_t> Inner() const {
    return std::vector<uint8_t>(bytes_.begin() + kGuard, bytes_.end() - kGuard);
  }
  bool GuardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (bytes_[i] != kGuardByte ||
          bytes_[bytes_.size() - 1 - i] != kGuardByte) {
        return false;
      }
    }
    return true;
  }

 private:
  std::vector<uint8_t> bytes_;
};

// ---------------------------------------------------------------------------
// Quantize and pack

// clip_bound: the worker's own bound (ClipRule::kWorker); +Inf clips at the
// scaler.
constexpr float kNoClipBound = std::numeric_limits<float>::infinity();

std::vector<uint8_t> CpuQuantize(const std::vector<float>& g, float scaler,
                                 Layout layout,
                                 float clip_bound = kNoClipBound) {
  std::vector<uint8_t> out(PackedTernaryBytes(g.size(), layout));
  QuantizePack(g, clip_bound, scaler, kStream, layout, absl::MakeSpan(out));
  return out;
}

// The GPU resolves the bound on the host (PlanCudaQuantize) as here.
std::vector<uint8_t> TileQuantize(const std::vector<float>& g, float scaler,
                                  Layout layout,
                                  float clip_bound = kNoClipBound) {
  const float bound = ClipBound(clip_bound, scaler);
  const uint64_t n = g.size();
  Guarded out(PackedTernaryBytes(n, layout));
  const uint32_t per_thread = layout == Layout::kTernaryBase3
                                  ? tile::kBase3Elements
                                  : tile::kTwoBitElements;
  for (uint64_t t = 0; t * per_thread < n; ++t) {
    if (layout == Layout::kTernaryBase3) {
      tile::QuantizeBase3Thread(g.data(), n, t, bound, scaler, kStream,
                                out.data());
    } else {
      tile::QuantizeTwoBitThread(g.data(), n, t, bound, scaler, kStream,
                                 out.data());
    }
  }
  EXPECT_TRUE(out.GuardsIntact()) << "n = " << n;
  return out.Inner();
}

TEST(TileQuantize, SizesMatchTheCpuFormulas) {
  for (uint64_t n : kSizes) {
    EXPECT_EQ(tile::TwoBitBytes(n),
              PackedTernaryBytes(n, Layout::kTernary2Bit));
    EXPECT_EQ(tile::Base3Bytes(n),
              PackedTernaryBytes(n, Layout::kTernaryBase3));
    for (uint32_t num_summands : {1u, 2u, 3u, 7u, 100u, kMaxSummands}) {
      EXPECT_EQ(tile::SumBitsBytes(n, SumBits(num_summands)),
                PackedSumBytes(n, num_summands, Layout::kSumBits));
    }
  }
}

TEST(TileQuantize, BytesEqualTheCpuForEveryLayoutAndSize) {
  for (Layout layout : {Layout::kTernary2Bit, Layout::kTernaryBase3}) {
    for (uint64_t n : kSizes) {
      const std::vector<float> g = Gradient(n, static_cast<uint32_t>(n));
      const float scaler = LocalScaler(ComputeStats(g), 2.5f);
      EXPECT_EQ(TileQuantize(g, scaler, layout), CpuQuantize(g, scaler, layout))
          << LayoutName(layout) << " n = " << n;
    }
  }
}

// Issue 18: a worker whose own bound s_ik is below the shared scaler.
TEST(TileQuantize, WorkerClipBoundsEqualTheCpu) {
  const float kInf = std::numeric_limits<float>::infinity();
  for (Layout layout : {Layout::kTernary2Bit, Layout::kTernaryBase3}) {
    for (uint64_t n : kSizes) {
      const std::vector<float> g = Gradient(n, static_cast<uint32_t>(n) + 7);
      const float own = LocalScaler(ComputeStats(g), 2.5f);
      const float shared = 3 * own + 0.5f;
      for (float clip_bound :
           {own, own / 4, 0.0f, -1.0f, std::nanf(""), kInf, 2 * shared}) {
        EXPECT_EQ(TileQuantize(g, shared, layout, clip_bound),
                  CpuQuantize(g, shared, layout, clip_bound))
            << LayoutName(layout) << " n = " << n << " bound " << clip_bound;
      }
    }
  }
}

TEST(TileQuantize, DegenerateScalersAndValuesEqualTheCpu) {
  const std::vector<float> g = Gradient(1003, 5, /*nonfinite=*/true);
  const float kInf = std::numeric_limits<float>::infinity();
  for (Layout layout : {Layout::kTernary2Bit, Layout::kTernaryBase3}) {
    for (float scaler :
         {0.0f, -1.0f, kInf, std::nanf(""), 1e-30f, 0.5f, 1e30f}) {
      EXPECT_EQ(TileQuantize(g, scaler, layout), CpuQuantize(g, scaler, layout))
          << LayoutName(layout) << " scaler " << scaler;
    }
  }
}

// ---------------------------------------------------------------------------
// Statistics

struct BlockNodes {
  std::vector<StatsNode> nodes;
  float shift = 0.0f;
  // The CPU's fold of the same lanes: sequential doubles over blocks and
  // lanes.
  double sequential_sum = 0.0;
  double sequential_sum_squares = 0.0;
};

// The stats kernel's per-block work, thread by thread.
BlockNodes TileBlockNodes(const std::vector<float>& g) {
  BlockNodes out;
  const uint64_t n = g.size();
  if (n == 0) return out;
  out.shift = tile::StatsShift(g[0]);
  for (uint64_t begin = 0; begin < n; begin += kStatsBlockSize) {
    const uint32_t len =
        static_cast<uint32_t>(std::min<uint64_t>(kStatsBlockSize, n - begin));
    float lane_sum[kStatsLanes];
    float lane_sum_squares[kStatsLanes];
    float max_abs = 0.0f;
    uint32_t nonfinite = 0;
    for (uint32_t q = 0; q < tile::kStatsThreadsPerBlock; ++q) {
      tile::StatsQuarter acc;
      tile::AccumulateStatsQuarter(g.data() + begin, len, q, out.shift, &acc);
      for (uint32_t j = 0; j < tile::kStatsLanesPerThread; ++j) {
        lane_sum[q * tile::kStatsLanesPerThread + j] = acc.sum[j];
        lane_sum_squares[q * tile::kStatsLanesPerThread + j] =
            acc.sum_squares[j];
      }
      max_abs = std::max(max_abs, acc.max_abs);
      nonfinite += acc.nonfinite;
    }
    for (uint32_t lane = 0; lane < kStatsLanes; ++lane) {
      out.sequential_sum += lane_sum[lane];
      out.sequential_sum_squares += lane_sum_squares[lane];
    }
    out.nodes.push_back(
        tile::StatsBlockNode(lane_sum, lane_sum_squares, max_abs, nonfinite));
  }
  return out;
}

// Lane L (element i, L = i % 16) scaled by 2^(4L): the lanes' sums span 60
// binary orders, so adding them to a double rounds, and a lane mixed up with
// another changes the bits.
std::vector<float> LaneScaled(size_t n, uint32_t seed) {
  std::vector<float> g = Gradient(n, seed);
  for (size_t i = 0; i < n; ++i) {
    g[i] = std::ldexp(g[i], 4 * static_cast<int>(i % kStatsLanes) - 30);
  }
  return g;
}

TEST(TileStats, LanesFollowTheCpuOrderBitForBit) {
  // With the CPU's sequential fold on top, the tile lanes give exactly the
  // CPU's moments: the per-lane float chains are the same.
  for (uint64_t n : kSizes) {
    for (int variant = 0; variant < 3; ++variant) {
      const std::vector<float> g =
          variant == 2 ? LaneScaled(n, static_cast<uint32_t>(n))
                       : Gradient(n, static_cast<uint32_t>(n) + 11,
                                  /*nonfinite=*/variant == 1);
      const ChunkStats cpu = ComputeStats(g);
      const BlockNodes tiles = TileBlockNodes(g);
      EXPECT_EQ(tiles.sequential_sum, cpu.shifted_sum) << "n = " << n;
      EXPECT_EQ(tiles.sequential_sum_squares, cpu.shifted_sum_squares)
          << "n = " << n;
      EXPECT_EQ(tiles.shift, cpu.shift) << "n = " << n;
    }
  }
}

TEST(TileStats, TreeFoldIsCloseToTheCpuAndExactInCountsAndMax) {
  for (uint64_t n : kSizes) {
    if (n == 0) continue;
    for (bool nonfinite : {false, true}) {
      const std::vector<float> g =
          Gradient(n, static_cast<uint32_t>(n) + 11, nonfinite);
      const ChunkStats cpu = ComputeStats(g);
      BlockNodes tiles = TileBlockNodes(g);
      tile::FoldStatsNodes(tiles.nodes.data(), tiles.nodes.size());
      const StatsNode& total = tiles.nodes[0];
      EXPECT_EQ(total.nonfinite, cpu.nonfinite);
      EXPECT_EQ(total.max_abs, cpu.max_abs);
      // Both sum the same block values in double; only the order differs.
      const double scale =
          std::sqrt(cpu.shifted_sum_squares * static_cast<double>(n)) + 1e-30;
      EXPECT_NEAR(total.sum, cpu.shifted_sum, 1e-12 * scale) << "n = " << n;
      EXPECT_NEAR(total.sum_squares, cpu.shifted_sum_squares,
                  1e-12 * cpu.shifted_sum_squares)
          << "n = " << n;
    }
  }
}

TEST(TileStats, StagedRowsEqualTheDirectPathBitForBit) {
  // A misaligned chunk is added eight staged rows at a time (zeros past
  // the data); the lanes must not change.
  constexpr uint32_t kStage = 8;
  for (uint32_t len : {1u, 31u, 33u, 1000u, 4095u, 4096u}) {
    const std::vector<float> g = LaneScaled(len, len);
    const float shift = tile::StatsShift(g[0]);
    for (uint32_t q = 0; q < tile::kStatsThreadsPerBlock; ++q) {
      tile::StatsQuarter direct;
      tile::AccumulateStatsQuarter(g.data(), len, q, shift, &direct);
      tile::StatsQuarter staged;
      tile::ClearStatsQuarter(&staged);
      const uint32_t rows = (len + kStatsLanes - 1) / kStatsLanes;
      for (uint32_t r0 = 0; r0 < rows; r0 += kStage) {
        float window[kStage * kStatsLanes] = {};
        for (uint32_t i = 0; i < kStage * kStatsLanes; ++i) {
          if (r0 * kStatsLanes + i < len) window[i] = g[r0 * kStatsLanes + i];
        }
        tile::AddStatsRows(window, r0, kStage, len, q, shift, &staged);
      }
      EXPECT_EQ(std::memcmp(&direct, &staged, sizeof(direct)), 0)
          << "len = " << len << ", q = " << q;
    }
  }
}

// The recursive definition the iterative fold claims to implement.
StatsNode RecursiveFold(const std::vector<StatsNode>& nodes, uint64_t begin,
                        uint64_t width) {
  if (width == 1) return nodes[begin];
  StatsNode left = RecursiveFold(nodes, begin, width / 2);
  if (begin + width / 2 < nodes.size()) {
    tile::CombineStatsNodes(&left,
                            RecursiveFold(nodes, begin + width / 2, width / 2));
  }
  return left;
}

std::vector<StatsNode> RandomNodes(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::vector<StatsNode> nodes(count);
  for (StatsNode& node : nodes) {
    node.sum = std::ldexp(mantissa(rng), exponent(rng));
    node.sum_squares = std::ldexp(std::fabs(mantissa(rng)), exponent(rng));
    node.nonfinite = rng() % 3;
    node.max_abs = static_cast<float>(std::fabs(mantissa(rng)));
  }
  return nodes;
}

bool SameBits(const StatsNode& a, const StatsNode& b) {
  return std::memcmp(&a.sum, &b.sum, sizeof(double)) == 0 &&
         std::memcmp(&a.sum_squares, &b.sum_squares, sizeof(double)) == 0 &&
         a.nonfinite == b.nonfinite && a.max_abs == b.max_abs;
}

TEST(TileStats, FoldIsTheAlignedPowerOfTwoTree) {
  for (size_t count : {1, 2, 3, 5, 31, 32, 33, 64, 100, 257, 1000}) {
    const std::vector<StatsNode> nodes = RandomNodes(count, count);
    uint64_t width = 1;
    while (width < count) width *= 2;
    std::vector<StatsNode> folded = nodes;
    tile::FoldStatsNodes(folded.data(), folded.size());
    EXPECT_TRUE(SameBits(folded[0], RecursiveFold(nodes, 0, width)))
        << "count = " << count;
  }
}

TEST(TileStats, FoldingInCtaGroupsThenAcrossGivesTheSameBits) {
  // The kernel folds each CTA's 32 blocks, then the CTAs' nodes.
  constexpr size_t kPerCta = 32;
  for (size_t count : {1, 31, 32, 33, 64, 65, 1000, 4099}) {
    const std::vector<StatsNode> nodes = RandomNodes(count, 7 * count);
    std::vector<StatsNode> whole = nodes;
    tile::FoldStatsNodes(whole.data(), whole.size());
    std::vector<StatsNode> ctas;
    for (size_t begin = 0; begin < count; begin += kPerCta) {
      std::vector<StatsNode> group(
          nodes.begin() + begin,
          nodes.begin() + std::min(count, begin + kPerCta));
      tile::FoldStatsNodes(group.data(), group.size());
      ctas.push_back(group[0]);
    }
    tile::FoldStatsNodes(ctas.data(), ctas.size());
    EXPECT_TRUE(SameBits(whole[0], ctas[0])) << "count = " << count;
  }
}

// ---------------------------------------------------------------------------
// Sums of pushes

struct Pushes {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<const uint8_t*> pointers;
};

Pushes MakePushes(const std::vector<float>& g, uint32_t num_pushes,
                  Layout layout) {
  Pushes pushes;
  const float scaler = LocalScaler(ComputeStats(g), 2.5f);
  for (uint32_t w = 0; w < num_pushes; ++w) {
    RandomStream stream = kStream;
    stream.worker = w;
    std::vector<uint8_t> packed(PackedTernaryBytes(g.size(), layout));
    QuantizePack(g, scaler, stream, layout, absl::MakeSpan(packed));
    pushes.bytes.push_back(std::move(packed));
  }
  for (const auto& push : pushes.bytes) pushes.pointers.push_back(push.data());
  return pushes;
}

// Runs the sum threads; returns the sums and fills errors[w].
std::vector<int32_t> TileSums(const Pushes& pushes, uint64_t n, Layout layout,
                              std::vector<uint32_t>* errors) {
  std::vector<int32_t> sums(n + 2 * kGuard, 0x5A5A5A5A);
  errors->assign(pushes.pointers.size(), 0);
  const uint32_t per_thread = layout == Layout::kTernaryBase3
                                  ? tile::kBase3Elements
                                  : tile::kTwoBitElements;
  const auto num = static_cast<uint32_t>(pushes.pointers.size());
  for (uint64_t t = 0; t * per_thread < n; ++t) {
    if (layout == Layout::kTernaryBase3) {
      tile::SumBase3Thread(pushes.pointers.data(), num, 0, n, t,
                           sums.data() + kGuard, errors->data(), 1);
    } else {
      tile::SumTwoBitThread(pushes.pointers.data(), num, 0, n, t,
                            sums.data() + kGuard, errors->data(), 1);
    }
  }
  for (size_t i = 0; i < kGuard; ++i) {
    EXPECT_EQ(sums[i], 0x5A5A5A5A);
    EXPECT_EQ(sums[sums.size() - 1 - i], 0x5A5A5A5A);
  }
  return std::vector<int32_t>(sums.begin() + kGuard, sums.end() - kGuard);
}

TEST(TileSums, SumsEqualTheCpuAccumulation) {
  for (Layout layout : {Layout::kTernary2Bit, Layout::kTernaryBase3}) {
    for (uint64_t n : kSizes) {
      for (uint32_t num_pushes : {1u, 2u, 3u, 4u, 7u}) {
        const std::vector<float> g = Gradient(n, static_cast<uint32_t>(n + 3));
        const Pushes pushes = MakePushes(g, num_pushes, layout);
        std::vector<int32_t> cpu(n, 0);
        for (const auto& push : pushes.bytes) {
          ASSERT_TRUE(
              AccumulateTernary(push, n, layout, absl::MakeSpan(cpu)).ok());
        }
        std::vector<uint32_t> errors;
        EXPECT_EQ(TileSums(pushes, n, layout, &errors), cpu)
            << LayoutName(layout) << " n = " << n << " N = " << num_pushes;
        EXPECT_EQ(errors, std::vector<uint32_t>(num_pushes, 0));
      }
    }
  }
}

TEST(TileSums, FlagsTheBadPushLikeTheCpu) {
  struct Case {
    Layout layout;
    uint64_t n;
    size_t byte;
    uint8_t value;
    uint32_t error;
  };
  const Case cases[] = {
      {Layout::kTernary2Bit, 33, 3, 0x0C, tile::kErrorBadValue},  // 11
      {Layout::kTernary2Bit, 33, 8, 0x04,
       tile::kErrorBadPadding},  // element 33
      {Layout::kTernaryBase3, 33, 2, 243, tile::kErrorBadValue},
      {Layout::kTernaryBase3, 33, 6, 27,
       tile::kErrorBadPadding},  // 3 of 5 used
  };
  for (const Case& c : cases) {
    const std::vector<float> g = Gradient(c.n, 9);
    Pushes pushes = MakePushes(g, 3, c.layout);
    pushes.bytes[1][c.byte] = c.value;
    std::vector<int32_t> cpu(c.n, 0);
    EXPECT_FALSE(
        AccumulateTernary(pushes.bytes[1], c.n, c.layout, absl::MakeSpan(cpu))
            .ok());
    std::vector<uint32_t> errors;
    TileSums(pushes, c.n, c.layout, &errors);
    EXPECT_EQ(errors, (std::vector<uint32_t>{0, c.error, 0}))
        << LayoutName(c.layout) << " byte " << c.byte;
  }
}

// ---------------------------------------------------------------------------
// Decoding pulls

std::vector<int32_t> RandomSums(uint64_t n, uint32_t num_summands,
                                uint32_t seed) {
  std::mt19937 rng(seed);
  const int32_t limit = static_cast<int32_t>(num_summands);
  std::uniform_int_distribution<int32_t> value(-limit, limit);
  std::vector<int32_t> sums(n);
  for (int32_t& sum : sums) sum = value(rng);
  if (n > 0) sums[0] = limit;
  if (n > 1) sums[n - 1] = -limit;
  return sums;
}

template <uint32_t kBits>
uint32_t SumBitsThreadsAs(const uint8_t* packed, uint64_t n,
                          uint32_t num_summands, float factor, float* out) {
  uint32_t errors = 0;
  for (uint64_t t = 0; t * tile::kSumBitsElements < n; ++t) {
    errors |= tile::DecodeSumBitsThread<kBits>(packed, n, t, num_summands,
                                               factor, out);
  }
  return errors;
}

uint32_t SumBitsThreads(const uint8_t* packed, uint64_t n,
                        uint32_t num_summands, float factor, float* out) {
  const uint32_t bits = SumBits(num_summands);
  if (bits < kMinSumBits || bits > kMaxSumBits) {
    ADD_FAILURE() << "no width for " << num_summands;
    return 0;
  }
  return DispatchSumBits(bits, [&](auto width) {
    return SumBitsThreadsAs<decltype(width)::value>(packed, n, num_summands,
                                                    factor, out);
  });
}

// Runs the decode threads of one pull; returns the values, fills *errors.
std::vector<float> TileDecode(const std::vector<uint8_t>& packed, uint64_t n,
                              uint32_t num_summands, Layout layout,
                              float scaler, uint32_t* errors) {
  std::vector<float> out(n + 2 * kGuard, -7.0f);
  float* values = out.data() + kGuard;
  const float factor = DecodeFactor(scaler, num_summands);
  *errors = 0;
  if (layout == Layout::kSumBits) {
    *errors = SumBitsThreads(packed.data(), n, num_summands, factor, values);
  } else {
    const tile::RadixParams radix = tile::MakeRadixParams(num_summands);
    for (uint64_t w = 0; w * radix.digits < n; ++w) {
      *errors |= tile::DecodeRadixWord(packed.data(), n, w, radix, num_summands,
                                       factor, values + w * radix.digits);
    }
  }
  for (size_t i = 0; i < kGuard; ++i) {
    EXPECT_EQ(out[i], -7.0f);
    EXPECT_EQ(out[out.size() - 1 - i], -7.0f);
  }
  return std::vector<float>(values, values + n);
}

std::vector<uint8_t> Pack(const std::vector<int32_t>& sums,
                          uint32_t num_summands, Layout layout) {
  std::vector<uint8_t> packed(
      PackedSumBytes(sums.size(), num_summands, layout));
  PackSums(sums, num_summands, layout, absl::MakeSpan(packed));
  return packed;
}

bool SameFloatBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

TEST(TileDecode, RadixParamsMatchTheCpu) {
  for (uint32_t num_summands :
       {1u, 2u, 3u, 4u, 7u, 12u, 100u, 1000u, 65535u, kMaxSummands}) {
    const tile::RadixParams radix = tile::MakeRadixParams(num_summands);
    EXPECT_EQ(radix.digits, SumRadixDigitsPerWord(num_summands));
    EXPECT_LE(radix.digits, tile::kMaxRadixDigits);
    EXPECT_LT(radix.chunk_base, uint64_t{1} << 32);
  }
}

TEST(TileDecode, ValuesEqualTheCpuForBothLayouts) {
  for (Layout layout : {Layout::kSumBits, Layout::kSumRadix}) {
    for (uint32_t num_summands :
         {1u, 2u, 3u, 4u, 7u, 8u, 100u, 4096u, kMaxSummands}) {
      for (uint64_t n : kSizes) {
        if (n > 100000 && num_summands > 8) continue;  // keep it quick
        const std::vector<int32_t> sums =
            RandomSums(n, num_summands, static_cast<uint32_t>(n));
        const std::vector<uint8_t> packed = Pack(sums, num_summands, layout);
        const float scaler = 0.37f;
        std::vector<float> cpu(n);
        ASSERT_TRUE(DecodeSums(packed, n, num_summands, layout, scaler,
                               absl::MakeSpan(cpu))
                        .ok());
        uint32_t errors = 1;
        EXPECT_TRUE(SameFloatBits(
            TileDecode(packed, n, num_summands, layout, scaler, &errors), cpu))
            << LayoutName(layout) << " N = " << num_summands << " n = " << n;
        EXPECT_EQ(errors, 0u);
      }
    }
  }
}

TEST(TileDecode, FlagsWhatTheCpuRejects) {
  struct Case {
    Layout layout;
    uint32_t num_summands;
    uint64_t n;
    size_t byte;
    uint8_t value;
    uint32_t error;
  };
  const Case cases[] = {
      // N = 2: 3-bit fields 0..4; field 7 in element 0.
      {Layout::kSumBits, 2, 13, 0, 0x07, tile::kErrorBadValue},
      // 13 * 3 = 39 bits: the last byte uses 7 bits, bit 7 is padding.
      {Layout::kSumBits, 2, 13, 4, 0x80, tile::kErrorBadPadding},
      // N = 1: radix 3, 40 digits per word; 0xFF.. is above 3^40.
      {Layout::kSumRadix, 1, 45, 7, 0xFF, tile::kErrorBadValue},
      // A short last word (5 digits) must be below 3^5.
      {Layout::kSumRadix, 1, 45, 9, 0x01, tile::kErrorBadValue},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> packed =
        Pack(std::vector<int32_t>(c.n, 0), c.num_summands, c.layout);
    packed[c.byte] |= c.value;
    std::vector<float> cpu(c.n);
    EXPECT_FALSE(DecodeSums(packed, c.n, c.num_summands, c.layout, 1.0f,
                            absl::MakeSpan(cpu))
                     .ok());
    uint32_t errors = 0;
    TileDecode(packed, c.n, c.num_summands, c.layout, 1.0f, &errors);
    EXPECT_EQ(errors, c.error) << LayoutName(c.layout) << " byte " << c.byte;
  }
}

}  // namespace
}  // namespace tern::kernels

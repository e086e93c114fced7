// The TernGrad CUDA kernels against the CPU kernels, bit for bit: packed
// pushes, integer sums and decoded pulls, on random inputs of awkward sizes
// (0, 1, 31, 32, 33, 2^20 + 3) and on a multi-chunk buffer in one launch,
// with aligned and misaligned chunk offsets. The statistics are compared
// exactly with a host evaluation of the GPU's summation order and within a
// tight tolerance with the CPU's.
//
// Tests that need a device report themselves SKIPPED without one (never
// passed); the chunk-table checks run on the host everywhere.
//
//   bazel test --config=cuda //kernels:terngrad_gpu_test --test_output=all
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "gtest/gtest.h"
#include "kernels/payload.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad.h"
#include "kernels/terngrad_cuda.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels {
namespace {

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, (1u << 20) + 3};
// The multi-chunk buffer: every awkward size in one launch.
constexpr uint64_t kChunkSizes[] = {0, 1, 31, 32, 33, 1000, (1u << 20) + 3};
constexpr uint32_t kSummandCounts[] = {1, 2, 3, 4, 7};
constexpr Layout kPushLayouts[] = {Layout::kTernary2Bit, Layout::kTernaryBase3};
constexpr Layout kPullLayouts[] = {Layout::kSumBits, Layout::kSumRadix};

const RandomStream kStream{
    .seed = 0xFEEDFACE12345678ull, .step = 41, .chunk = 0, .worker = 1};

std::vector<float> Gradient(size_t n, uint32_t seed, bool nonfinite = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = normal(rng) * (i % 89 == 5 ? 30.0f : 1.0f) + 0.002f;
    if (nonfinite && i % 331 == 17) {
      g[i] = i % 2 ? -std::numeric_limits<float>::infinity()
                   : std::numeric_limits<float>::quiet_NaN();
    }
  }
  return g;
}

// A flat buffer of chunks laid end to end from `first` on: chunk offsets
// are as misaligned as a model's tensors make them.
struct FlatChunks {
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> counts;
  uint64_t total = 0;
};

FlatChunks Lay(absl::Span<const uint64_t> counts, uint64_t first) {
  FlatChunks flat;
  flat.total = first;
  for (uint64_t count : counts) {
    flat.offsets.push_back(flat.total);
    flat.counts.push_back(count);
    flat.total += count;
  }
  return flat;
}

// The statistics the GPU must produce: its own tree over the CPU's lanes,
// evaluated on the host with the same tile functions.
tile::StatsNode ExpectedGpuNode(absl::Span<const float> g) {
  std::vector<tile::StatsNode> nodes;
  const float shift = tile::StatsShift(g[0]);
  for (uint64_t begin = 0; begin < g.size(); begin += kStatsBlockSize) {
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(kStatsBlockSize, g.size() - begin));
    float sum[kStatsLanes];
    float sum_squares[kStatsLanes];
    float max_abs = 0.0f;
    uint32_t nonfinite = 0;
    for (uint32_t q = 0; q < tile::kStatsThreadsPerBlock; ++q) {
      tile::StatsQuarter acc;
      tile::AccumulateStatsQuarter(g.data() + begin, len, q, shift, &acc);
      for (uint32_t j = 0; j < tile::kStatsLanesPerThread; ++j) {
        sum[q * tile::kStatsLanesPerThread + j] = acc.sum[j];
        sum_squares[q * tile::kStatsLanesPerThread + j] = acc.sum_squares[j];
      }
      max_abs = std::max(max_abs, acc.max_abs);
      nonfinite += acc.nonfinite;
    }
    nodes.push_back(tile::StatsBlockNode(sum, sum_squares, max_abs, nonfinite));
  }
  tile::FoldStatsNodes(nodes.data(), nodes.size());
  return nodes[0];
}

void ExpectStatsMatch(const ChunkStats& gpu, absl::Span<const float> g,
                      const std::string& where) {
  const ChunkStats cpu = ComputeStats(g);
  EXPECT_EQ(gpu.count, cpu.count) << where;
  EXPECT_EQ(gpu.nonfinite, cpu.nonfinite) << where;
  EXPECT_EQ(gpu.shift, cpu.shift) << where;
  EXPECT_EQ(gpu.max_abs, cpu.max_abs) << where;
  // The CPU adds the same lane values in another order: the difference is
  // double rounding, ~1e-16 of the magnitudes added.
  const double scale =
      std::sqrt(cpu.shifted_sum_squares * static_cast<double>(g.size())) +
      1e-30;
  EXPECT_NEAR(gpu.shifted_sum, cpu.shifted_sum, 1e-12 * scale) << where;
  EXPECT_NEAR(gpu.shifted_sum_squares, cpu.shifted_sum_squares,
              1e-12 * cpu.shifted_sum_squares + 1e-300)
      << where;
  EXPECT_NEAR(LocalScaler(gpu, 2.5f), LocalScaler(cpu, 2.5f),
              1e-6 * LocalScaler(cpu, 2.5f))
      << where;
  if (g.empty()) return;
  // Exactly what the GPU's summation order gives.
  const tile::StatsNode expected = ExpectedGpuNode(g);
  EXPECT_EQ(gpu.shifted_sum, expected.sum) << where;
  EXPECT_EQ(gpu.shifted_sum_squares, expected.sum_squares) << where;
}

bool SameFloatBits(absl::Span<const float> a, absl::Span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

template <typename T>
DeviceArray<T> Upload(absl::Span<const T> host) {
  absl::StatusOr<DeviceArray<T>> array = DeviceArray<T>::FromHost(host);
  EXPECT_TRUE(array.ok()) << array.status();
  return array.ok() ? *std::move(array) : DeviceArray<T>();
}

template <typename T>
std::vector<T> Download(const DeviceArray<T>& array) {
  absl::StatusOr<std::vector<T>> host = array.ToHost();
  EXPECT_TRUE(host.ok()) << host.status();
  return host.ok() ? *std::move(host) : std::vector<T>();
}

// ---------------------------------------------------------------------------
// Chunk tables (host only: these run without a GPU).

TEST(CudaPlan, AssignsCtasInOrderAndNoneToEmptyChunks) {
  const CudaStatsChunk chunks[] = {
      {0, 0}, {0, 1}, {1, cuda::kStatsElementsPerCta + 1}, {0, 0}, {5, 7}};
  absl::StatusOr<CudaLaunchTable<cuda::StatsChunk>> table =
      PlanCudaStats(chunks, cuda::kStatsElementsPerCta + 2);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->first_cta, (std::vector<uint32_t>{0, 0, 1, 3, 3}));
  EXPECT_EQ(table->num_ctas, 4u);
}

TEST(CudaPlan, RejectsRangesOutsideTheirBuffers) {
  const CudaStatsChunk stats[] = {{10, 11}};
  EXPECT_EQ(PlanCudaStats(stats, 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  const CudaStatsChunk overflow[] = {{~uint64_t{0}, 2}};
  EXPECT_EQ(PlanCudaStats(overflow, 20).status().code(),
            absl::StatusCode::kInvalidArgument);

  const CudaEncodeChunk encode[] = {
      {.key = 1, .offset = 0, .count = 33, .packed_offset = 2, .scaler = 1.0f}};
  // 33 elements take 9 bytes in 2-bit: [2, 11) does not fit in 10.
  EXPECT_EQ(
      PlanCudaQuantize(encode, 33, Layout::kTernary2Bit, 10).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PlanCudaQuantize(encode, 33, Layout::kTernary2Bit, 11).ok());
  EXPECT_EQ(PlanCudaQuantize(encode, 33, Layout::kSumBits, 100).status().code(),
            absl::StatusCode::kInvalidArgument);

  const CudaSumChunk pull[] = {
      {.key = 4, .packed_offset = 0, .count = 8, .offset = 0, .scaler = 1.0f}};
  EXPECT_EQ(
      PlanCudaDecodeSums(pull, 100, 0, Layout::kSumBits, 8).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      PlanCudaDecodeSums(pull, 100, 2, Layout::kSumBits, 7).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PlanCudaDecodeSums(pull, 3, 2, Layout::kSumBits, 8).ok());
  EXPECT_EQ(PlanCudaSumPushes(pull, 1, Layout::kTernary2Bit, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CudaPlan, RejectsOverlappingOutputs) {
  const CudaEncodeChunk encode[] = {
      {.key = 0, .offset = 0, .count = 8, .packed_offset = 0},
      {.key = 1, .offset = 8, .count = 8, .packed_offset = 1}};
  const absl::Status status =
      PlanCudaQuantize(encode, 16, Layout::kTernary2Bit, 4).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("overlap"), absl::string_view::npos)
      << status;
  const CudaSumChunk sums[] = {
      {.key = 0, .packed_offset = 0, .count = 8, .offset = 0},
      {.key = 1, .packed_offset = 2, .count = 8, .offset = 7}};
  EXPECT_EQ(
      PlanCudaSumPushes(sums, 4, Layout::kTernary2Bit, 15).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(CudaStatusTest, NamesTheCallAndTheError) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaMalloc").ok());
  const absl::Status status =
      CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("cudaMalloc"), absl::string_view::npos);
  EXPECT_NE(status.message().find("cudaErrorMemoryAllocation"),
            absl::string_view::npos);
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "cudaGetDevice").code(),
            absl::StatusCode::kUnavailable);
}

// ---------------------------------------------------------------------------
// On the device.

class TernGradCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device: this test needs a GPU";
    }
    absl::StatusOr<std::unique_ptr<TernGradCuda>> context =
        TernGradCuda::Create();
    ASSERT_TRUE(context.ok()) << context.status();
    cuda_ = *std::move(context);
  }

  // Statistics of every chunk of `flat` (values at flat.offsets) on the
  // GPU, compared with the CPU.
  std::vector<ChunkStats> CheckStats(const std::vector<float>& values,
                                     const FlatChunks& flat,
                                     const std::string& where) {
    const DeviceArray<float> device = Upload<float>(values);
    std::vector<CudaStatsChunk> chunks;
    for (size_t c = 0; c < flat.counts.size(); ++c) {
      chunks.push_back({flat.offsets[c], flat.counts[c]});
    }
    absl::StatusOr<std::vector<ChunkStats>> stats =
        cuda_->ComputeStats(device.data(), values.size(), chunks);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return {};
    for (size_t c = 0; c < chunks.size(); ++c) {
      ExpectStatsMatch(
          (*stats)[c],
          absl::MakeConstSpan(values).subspan(flat.offsets[c], flat.counts[c]),
          where + " chunk " + std::to_string(c));
    }
    return *stats;
  }

  // Quantizes every chunk on the GPU (packed one after the other from byte
  // `packed_first`) and compares each chunk's bytes with the CPU. Returns
  // the device payload buffer and the chunk table. `clip_bounds` (one per
  // chunk, or empty: clip at the scaler) are the workers' own bounds of
  // ClipRule::kWorker.
  std::pair<DeviceArray<uint8_t>, std::vector<CudaEncodeChunk>> CheckQuantize(
      const DeviceArray<float>& device, const std::vector<float>& values,
      const FlatChunks& flat, const std::vector<float>& scalers,
      const RandomStream& stream, Layout layout, uint64_t packed_first,
      const std::string& where, const std::vector<float>& clip_bounds = {}) {
    std::vector<CudaEncodeChunk> chunks;
    uint64_t packed_size = packed_first;
    for (size_t c = 0; c < flat.counts.size(); ++c) {
      chunks.push_back({.key = static_cast<uint32_t>(100 + c),
                        .offset = flat.offsets[c],
                        .count = flat.counts[c],
                        .packed_offset = packed_size,
                        .scaler = scalers[c]});
      if (!clip_bounds.empty()) chunks.back().clip_bound = clip_bounds[c];
      packed_size += PackedTernaryBytes(flat.counts[c], layout);
    }
    // Poisoned, so bytes the kernel fails to write show up.
    DeviceArray<uint8_t> packed =
        Upload<uint8_t>(std::vector<uint8_t>(packed_size, 0xEE));
    const absl::Status status =
        cuda_->QuantizePack(device.data(), values.size(), chunks, stream,
                            layout, packed.data(), packed_size);
    EXPECT_TRUE(status.ok()) << status;
    const std::vector<uint8_t> gpu = Download(packed);
    for (size_t i = 0; i < packed_first && i < gpu.size(); ++i) {
      EXPECT_EQ(gpu[i], 0xEE) << where << ": wrote before the first chunk";
    }
    for (size_t c = 0; c < chunks.size(); ++c) {
      RandomStream chunk_stream = stream;
      chunk_stream.chunk = chunks[c].key;
      std::vector<uint8_t> cpu(PackedTernaryBytes(flat.counts[c], layout));
      QuantizePack(
          absl::MakeConstSpan(values).subspan(flat.offsets[c], flat.counts[c]),
          chunks[c].clip_bound, scalers[c], chunk_stream, layout,
          absl::MakeSpan(cpu));
      const std::vector<uint8_t> got(
          gpu.begin() + chunks[c].packed_offset,
          gpu.begin() + chunks[c].packed_offset + cpu.size());
      EXPECT_EQ(got, cpu) << where << " chunk " << c << " (" << flat.counts[c]
                          << " elements, " << LayoutName(layout) << ")";
    }
    return {std::move(packed), std::move(chunks)};
  }

  std::unique_ptr<TernGradCuda> cuda_;
};

TEST_F(TernGradCudaTest, OneChunkOfEachSizeMatchesTheCpu) {
  for (uint64_t n : kSizes) {
    // first = 0: aligned; 1 and 3: float4 loads must fall back.
    for (uint64_t first : {0, 1, 3}) {
      const std::string where =
          "n = " + std::to_string(n) + ", offset " + std::to_string(first);
      const uint64_t counts[] = {n};
      const FlatChunks flat = Lay(counts, first);
      std::vector<float> values = Gradient(flat.total, 7 + n);
      const std::vector<ChunkStats> stats = CheckStats(values, flat, where);
      ASSERT_EQ(stats.size(), 1u);
      const std::vector<float> scalers = {LocalScaler(stats[0], 2.5f)};
      const DeviceArray<float> device = Upload<float>(values);
      for (Layout layout : kPushLayouts) {
        // Packed at byte 0 (aligned) and 1 (byte stores).
        for (uint64_t packed_first : {0, 1}) {
          CheckQuantize(device, values, flat, scalers, kStream, layout,
                        packed_first, where);
        }
      }
    }
  }
}

TEST_F(TernGradCudaTest, NonFiniteValuesAndDegenerateScalersMatchTheCpu) {
  const uint64_t counts[] = {1000, 4096, 5000, 1};
  const FlatChunks flat = Lay(counts, 2);
  std::vector<float> values = Gradient(flat.total, 3, /*nonfinite=*/true);
  values[flat.offsets[3]] = std::numeric_limits<float>::quiet_NaN();
  CheckStats(values, flat, "nonfinite");
  const DeviceArray<float> device = Upload<float>(values);
  const std::vector<float> scalers = {
      0.0f, std::numeric_limits<float>::infinity(), -1.0f, 1e-3f};
  for (Layout layout : kPushLayouts) {
    CheckQuantize(device, values, flat, scalers, kStream, layout, 0,
                  "degenerate");
  }
}

TEST_F(TernGradCudaTest, ManyChunksInOneLaunchMatchTheCpu) {
  const FlatChunks flat = Lay(kChunkSizes, 1);
  const std::vector<float> values = Gradient(flat.total, 99);
  const std::vector<ChunkStats> stats = CheckStats(values, flat, "multi");
  ASSERT_EQ(stats.size(), flat.counts.size());
  std::vector<float> scalers;
  for (const ChunkStats& s : stats) scalers.push_back(LocalScaler(s, 2.5f));
  const DeviceArray<float> device = Upload<float>(values);
  for (Layout layout : kPushLayouts) {
    CheckQuantize(device, values, flat, scalers, kStream, layout, 0, "multi");
  }
}

// Issue 18: each chunk clipped at the worker's own bound s_ik under a larger
// shared scaler (ClipRule::kWorker), plus degenerate bounds.
TEST_F(TernGradCudaTest, WorkerClipBoundsMatchTheCpu) {
  const FlatChunks flat = Lay(kChunkSizes, 1);
  const std::vector<float> values = Gradient(flat.total, 18);
  const std::vector<ChunkStats> stats = CheckStats(values, flat, "bounds");
  ASSERT_EQ(stats.size(), flat.counts.size());
  const float kInf = std::numeric_limits<float>::infinity();
  const float odd_bounds[] = {0.0f, -1.0f, std::nanf(""), kInf};
  std::vector<float> scalers, bounds;
  for (size_t c = 0; c < stats.size(); ++c) {
    const float own = LocalScaler(stats[c], 2.5f);
    scalers.push_back(3 * own + 1e-3f);
    bounds.push_back(c % 2 == 1 ? odd_bounds[(c / 2) % 4] : own);
  }
  const DeviceArray<float> device = Upload<float>(values);
  for (Layout layout : kPushLayouts) {
    CheckQuantize(device, values, flat, scalers, kStream, layout, 0, "bounds",
                  bounds);
  }
}

TEST_F(TernGradCudaTest, SumsAndPullsOfNWorkersMatchTheCpu) {
  const FlatChunks flat = Lay(kChunkSizes, 0);
  const std::vector<float> values = Gradient(flat.total, 5);
  const DeviceArray<float> device = Upload<float>(values);
  std::vector<float> scalers;
  for (size_t c = 0; c < flat.counts.size(); ++c) {
    scalers.push_back(
        LocalScaler(ComputeStats(absl::MakeConstSpan(values).subspan(
                        flat.offsets[c], flat.counts[c])),
                    2.5f));
  }
  for (Layout push_layout : kPushLayouts) {
    for (uint32_t num_workers : kSummandCounts) {
      const std::string where = std::string(LayoutName(push_layout)) +
                                ", N = " + std::to_string(num_workers);
      // Every worker encodes the same gradient with its own stream.
      std::vector<DeviceArray<uint8_t>> pushes;
      std::vector<const uint8_t*> push_pointers;
      std::vector<CudaEncodeChunk> encoded;
      for (uint32_t w = 0; w < num_workers; ++w) {
        RandomStream stream = kStream;
        stream.worker = w;
        auto [packed, chunks] = CheckQuantize(device, values, flat, scalers,
                                              stream, push_layout, 0, where);
        push_pointers.push_back(packed.data());
        pushes.push_back(std::move(packed));
        encoded = std::move(chunks);
      }
      const uint64_t push_size = pushes[0].size();
      std::vector<CudaSumChunk> sum_chunks;
      for (const CudaEncodeChunk& chunk : encoded) {
        sum_chunks.push_back({.key = chunk.key,
                              .packed_offset = chunk.packed_offset,
                              .count = chunk.count,
                              .offset = chunk.offset,
                              .scaler = chunk.scaler});
      }
      DeviceArray<int32_t> sums =
          Upload<int32_t>(std::vector<int32_t>(flat.total, 12345));
      const absl::Status summed =
          cuda_->SumTernaryPushes(push_pointers, push_size, sum_chunks,
                                  push_layout, sums.data(), flat.total);
      ASSERT_TRUE(summed.ok()) << summed;
      const std::vector<int32_t> gpu_sums = Download(sums);

      // The CPU reference: the same pushes, accumulated chunk by chunk.
      std::vector<std::vector<uint8_t>> host_pushes;
      for (const auto& push : pushes) host_pushes.push_back(Download(push));
      for (size_t c = 0; c < sum_chunks.size(); ++c) {
        const CudaSumChunk& chunk = sum_chunks[c];
        const size_t bytes = PackedTernaryBytes(chunk.count, push_layout);
        std::vector<int32_t> cpu(chunk.count, 0);
        for (const auto& push : host_pushes) {
          ASSERT_TRUE(
              AccumulateTernary(
                  absl::MakeConstSpan(push).subspan(chunk.packed_offset, bytes),
                  chunk.count, push_layout, absl::MakeSpan(cpu))
                  .ok());
        }
        EXPECT_TRUE(
            std::equal(cpu.begin(), cpu.end(), gpu_sums.begin() + chunk.offset))
            << where << " sums of chunk " << c;

        // The pull, packed on the host as a server does, decoded on both.
        for (Layout pull_layout : kPullLayouts) {
          std::vector<uint8_t> pull(
              PackedSumBytes(chunk.count, num_workers, pull_layout));
          PackSums(cpu, num_workers, pull_layout, absl::MakeSpan(pull));
          std::vector<float> cpu_values(chunk.count);
          ASSERT_TRUE(DecodeSums(pull, chunk.count, num_workers, pull_layout,
                                 chunk.scaler, absl::MakeSpan(cpu_values))
                          .ok());
          // Decoded into the middle of a poisoned buffer at offset 1.
          const CudaSumChunk pull_chunk{.key = chunk.key,
                                        .packed_offset = 0,
                                        .count = chunk.count,
                                        .offset = 1,
                                        .scaler = chunk.scaler};
          const DeviceArray<uint8_t> device_pull = Upload<uint8_t>(pull);
          DeviceArray<float> out =
              Upload<float>(std::vector<float>(chunk.count + 2, -9.0f));
          const absl::Status decoded = cuda_->DecodeSums(
              device_pull.data(), pull.size(), {pull_chunk}, num_workers,
              pull_layout, out.data(), chunk.count + 2);
          ASSERT_TRUE(decoded.ok()) << decoded;
          const std::vector<float> gpu_values = Download(out);
          EXPECT_EQ(gpu_values.front(), -9.0f);
          EXPECT_EQ(gpu_values.back(), -9.0f);
          EXPECT_TRUE(SameFloatBits(
              absl::MakeConstSpan(gpu_values).subspan(1, chunk.count),
              cpu_values))
              << where << ", " << LayoutName(pull_layout) << ", chunk " << c;
        }
      }
    }
  }
}

TEST_F(TernGradCudaTest, ManyPullsInOneLaunchMatchTheCpu) {
  for (Layout pull_layout : kPullLayouts) {
    for (uint32_t num_summands : kSummandCounts) {
      const FlatChunks flat = Lay(kChunkSizes, 0);
      std::mt19937 rng(num_summands);
      std::uniform_int_distribution<int32_t> sum(
          -static_cast<int32_t>(num_summands),
          static_cast<int32_t>(num_summands));
      std::vector<uint8_t> pull;
      std::vector<CudaSumChunk> chunks;
      std::vector<float> cpu(flat.total);
      for (size_t c = 0; c < flat.counts.size(); ++c) {
        std::vector<int32_t> sums(flat.counts[c]);
        for (int32_t& s : sums) s = sum(rng);
        std::vector<uint8_t> bytes(
            PackedSumBytes(sums.size(), num_summands, pull_layout));
        PackSums(sums, num_summands, pull_layout, absl::MakeSpan(bytes));
        const float scaler = 0.01f * static_cast<float>(c + 1);
        chunks.push_back({.key = static_cast<uint32_t>(c),
                          .packed_offset = pull.size(),
                          .count = flat.counts[c],
                          .offset = flat.offsets[c],
                          .scaler = scaler});
        ASSERT_TRUE(
            DecodeSums(
                bytes, sums.size(), num_summands, pull_layout, scaler,
                absl::MakeSpan(cpu).subspan(flat.offsets[c], flat.counts[c]))
                .ok());
        pull.insert(pull.end(), bytes.begin(), bytes.end());
      }
      const DeviceArray<uint8_t> device_pull = Upload<uint8_t>(pull);
      DeviceArray<float> out =
          Upload<float>(std::vector<float>(flat.total, -9.0f));
      const absl::Status status =
          cuda_->DecodeSums(device_pull.data(), pull.size(), chunks,
                            num_summands, pull_layout, out.data(), flat.total);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_TRUE(SameFloatBits(Download(out), cpu))
          << LayoutName(pull_layout) << ", N = " << num_summands;
    }
  }
}

TEST_F(TernGradCudaTest,
       CorruptPushesAndPullsAreInvalidArgumentNamingTheChunk) {
  // Push: chunk key 7, 33 elements in 2-bit; byte 3 gets a field 11.
  std::vector<uint8_t> good(PackedTernaryBytes(33, Layout::kTernary2Bit), 0);
  std::vector<uint8_t> bad = good;
  bad[3] = 0x03;
  const DeviceArray<uint8_t> good_push = Upload<uint8_t>(good);
  const DeviceArray<uint8_t> bad_push = Upload<uint8_t>(bad);
  DeviceArray<int32_t> sums = Upload<int32_t>(std::vector<int32_t>(33, 0));
  const CudaSumChunk chunk{
      .key = 7, .packed_offset = 0, .count = 33, .offset = 0, .scaler = 1.0f};
  const uint8_t* pushes[] = {good_push.data(), bad_push.data()};
  absl::Status status = cuda_->SumTernaryPushes(
      pushes, good.size(), {chunk}, Layout::kTernary2Bit, sums.data(), 33);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("push 1 of chunk 7"), absl::string_view::npos)
      << status;

  // Pull: N = 2 in SUM_BITS, a field of 7 (above 2N = 4).
  std::vector<uint8_t> pull(PackedSumBytes(33, 2, Layout::kSumBits), 0);
  pull[0] = 0x07;
  const DeviceArray<uint8_t> device_pull = Upload<uint8_t>(pull);
  DeviceArray<float> out = Upload<float>(std::vector<float>(33, 0.0f));
  status = cuda_->DecodeSums(device_pull.data(), pull.size(), {chunk}, 2,
                             Layout::kSumBits, out.data(), 33);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("chunk 7"), absl::string_view::npos)
      << status;

  // The context stays usable after a rejected payload.
  const uint8_t* good_pushes[] = {good_push.data()};
  EXPECT_TRUE(cuda_
                  ->SumTernaryPushes(good_pushes, good.size(), {chunk},
                                     Layout::kTernary2Bit, sums.data(), 33)
                  .ok());
}

TEST_F(TernGradCudaTest, BadTablesAreRejectedBeforeAnyLaunch) {
  const DeviceArray<float> values = Upload<float>(std::vector<float>(10, 1.0f));
  const CudaStatsChunk chunks[] = {{5, 6}};
  EXPECT_EQ(cuda_->ComputeStats(values.data(), 10, chunks).status().code(),
            absl::StatusCode::kInvalidArgument);
  DeviceArray<uint8_t> packed = Upload<uint8_t>(std::vector<uint8_t>(2, 0));
  const CudaEncodeChunk encode[] = {
      {.key = 0, .offset = 0, .count = 10, .packed_offset = 0, .scaler = 1}};
  EXPECT_EQ(cuda_
                ->QuantizePack(values.data(), 10, encode, kStream,
                               Layout::kTernary2Bit, packed.data(), 2)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern::kernels

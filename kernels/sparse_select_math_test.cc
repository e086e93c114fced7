// The CUDA sparse kernels' arithmetic (sparse_select_math.h) run on the
// host, step for step as sparse_gpu.cu runs it (the same sample keys, the
// same radix-select passes, the same kept words and group means), compared
// bit for bit with the CPU code: SampledMagnitudeThreshold,
// SampledSignedThresholds and the dropping / adaptive codecs' payloads. It
// runs in every build, without a GPU; sparse_gpu_test.cc compares the
// device itself.
#include "kernels/sparse_select_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/adaptive_codec.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/dropping_codec.h"
#include "kernels/index_packing.h"
#include "kernels/payload.h"
#include "kernels/twin_test_util.h"
#include "kernels/sparse_cuda_plan.h"
#include "kernels/sparse_select.h"

namespace tern::kernels {
namespace {

using twin_test::Bits;
using twin_test::ExpectSamePayload;

constexpr uint64_t kSizes[] = {0, 1, 31, 32, 33, 1000, (1u << 20) + 3};
// Below every size, between them, and above the largest.
constexpr uint32_t kSampleSizes[] = {1, 33, 4096, 1u << 21};
constexpr float kDropRatios[] = {0.0f, 0.25f, 0.5f, 0.7f, 0.99f, 0.999f,
                                 1.0f, -0.5f};
constexpr float kProportions[] = {0.0f, 1.0f / 64, 0.3f, 0.5f, 1.0f};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

const RandomStream kStream{
    .seed = 0xC0FFEE1234ull, .step = 9, .chunk = 3, .worker = 2};

// Gaussian values with ties (every 7th rounded to a coarse grid), zeros of
// both signs and, when asked, NaN and infinities.
std::vector<float> Values(size_t n, uint32_t seed, bool nonfinite) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    float v = normal(rng);
    if (i % 7 == 3) v = std::round(v * 4.0f) / 4.0f;
    if (i % 101 == 5) v = 0.0f;
    if (i % 103 == 6) v = -0.0f;
    if (nonfinite && i % 37 == 11) v = kNaN;
    if (nonfinite && i % 53 == 12) v = i % 2 ? kInf : -kInf;
    values[i] = v;
  }
  return values;
}

// ---------------------------------------------------------------------------
// The device's steps, on the host.

// GatherSampleKernel: the keys of the sample of the table's concatenation.
std::vector<uint32_t> GatherKeys(absl::Span<const float> buffer,
                                 const SampleTable& table,
                                 uint32_t sample_size,
                                 const RandomStream& stream,
                                 bool signed_keys) {
  const uint32_t slots = sparse::SampleSlots(table.total, sample_size);
  const bool drawn = sparse::SampleIsDrawn(table.total, sample_size);
  std::vector<uint32_t> keys(slots);
  for (uint32_t j = 0; j < slots; ++j) {
    const uint64_t index =
        drawn ? sparse::SampleIndex(stream, j, table.total) : j;
    const sparse::SampleChunk chunk = table.chunks[sparse::FindSampleChunk(
        table.chunks.data(), static_cast<uint32_t>(table.chunks.size()),
        index)];
    const float value = buffer[chunk.offset + (index - chunk.first)];
    keys[j] =
        signed_keys ? sparse::SignedKey(value) : sparse::MagnitudeKey(value);
  }
  return keys;
}

// SparseCuda's initial thresholds and LaunchRadixSelect's passes.
void SelectOnHost(const std::vector<uint32_t>& keys,
                  std::vector<sparse::RadixSelect> selects,
                  float thresholds[2]) {
  thresholds[0] = thresholds[1] = 0.0f;
  for (const auto& select : selects) sparse::StoreThreshold(select, thresholds);
  if (keys.empty()) return;
  for (uint32_t pass = 0; pass < sparse::kRadixPasses; ++pass) {
    for (sparse::RadixSelect& select : selects) {
      uint32_t histogram[sparse::kRadixBins] = {};
      for (const uint32_t key : keys) {
        if (sparse::IsCandidate(select, key)) {
          ++histogram[sparse::RadixDigit(key, pass)];
        }
      }
      sparse::RadixSelectStep(&select, pass, histogram);
    }
  }
  for (const auto& select : selects) sparse::StoreThreshold(select, thresholds);
}

float MagnitudeOnHost(absl::Span<const float> buffer, const SampleTable& table,
                      float drop_ratio, uint32_t sample_size) {
  float thresholds[2];
  SelectOnHost(GatherKeys(buffer, table, sample_size, kStream, false),
               {sparse::StartSelect(sparse::SelectRule::kMagnitude,
                                    drop_ratio)},
               thresholds);
  return thresholds[0];
}

SignedThresholds SignedOnHost(absl::Span<const float> values, float proportion,
                              uint32_t sample_size,
                              const RandomStream& stream = kStream) {
  const CudaSparseChunk whole[] = {{0, values.size()}};
  const absl::StatusOr<SampleTable> table =
      PlanSampleTable(whole, values.size());
  EXPECT_TRUE(table.ok()) << table.status();
  float thresholds[2];
  SelectOnHost(
      GatherKeys(values, *table, sample_size, stream, true),
      {sparse::StartSelect(sparse::SelectRule::kPositive, proportion),
       sparse::StartSelect(sparse::SelectRule::kNegative, proportion)},
      thresholds);
  return {thresholds[0], thresholds[1]};
}

// KeepScatterKernel and GroupMeansKernel, and the wrapper's payload.
Payload EncodeOnHost(CodecId codec, Layout layout, uint32_t group_size,
                     absl::Span<const float> values, float positive,
                     float negative) {
  std::vector<uint32_t> out;
  std::vector<float> kept;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t kind = sparse::KeepKind(values[i], positive, negative);
    if (kind == sparse::kNotKept) continue;
    if (layout == Layout::kIndexValue) {
      out.push_back(static_cast<uint32_t>(i));
      out.push_back(Bits(values[i]));
    } else {
      out.push_back(sparse::KeptWord(static_cast<uint32_t>(i), kind));
      kept.push_back(values[i]);
    }
  }
  Payload payload;
  payload.codec = codec;
  payload.layout = layout;
  payload.num_elements = values.size();
  payload.num_summands = 1;
  std::string header;
  if (layout == Layout::kIndexSign) {
    header.assign(reinterpret_cast<const char*>(&group_size), 4);
    const uint64_t groups = NumGroups(values.size(), group_size);
    payload.scalers.resize(2 * groups);
    for (uint64_t g = 0; g < groups; ++g) {
      const uint64_t begin =
          sparse::LowerBoundWord(out.data(), out.size(), g * group_size);
      const uint64_t end =
          sparse::LowerBoundWord(out.data(), out.size(), (g + 1) * group_size);
      sparse::KeptMeans(out.data(), kept.data(), begin, end,
                        &payload.scalers[2 * g], &payload.scalers[2 * g + 1]);
    }
  }
  payload.data = header + std::string(reinterpret_cast<const char*>(out.data()),
                                      out.size() * 4);
  return payload;
}

// ---------------------------------------------------------------------------
// Pieces.

TEST(SparseSelectMath, RoundedCountIsLlround) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> fractions = {0.5f, 0.7f, 0.99f, 1.0f / 64, 0.999f,
                                  0.25f, 0.125f};
  for (int i = 0; i < 200; ++i) fractions.push_back(uniform(rng));
  for (const float fraction : fractions) {
    for (uint64_t count : {1ull, 2ull, 3ull, 10ull, 64ull, 100ull, 4095ull,
                           4096ull, 1000003ull, 4294967295ull}) {
      EXPECT_EQ(sparse::RoundedCount(fraction, count),
                static_cast<uint64_t>(std::llround(
                    static_cast<double>(fraction) * count)))
          << fraction << " of " << count;
    }
  }
  EXPECT_EQ(sparse::RoundedCount(0.0, 10), 0u);
  EXPECT_EQ(sparse::RoundedCount(-1.0, 10), 0u);
  EXPECT_EQ(sparse::RoundedCount(kNaN, 10), 0u);
  EXPECT_EQ(sparse::RoundedCount(1.0, 10), 10u);
  EXPECT_EQ(sparse::RoundedCount(0.25, 10), 3u);  // 2.5 rounds away from 0
}

TEST(SparseSelectMath, KeysOrderFiniteValuesAndRoundTrip) {
  const std::vector<float> ascending = {
      -std::numeric_limits<float>::max(), -1.5f, -1.0f,
      -std::numeric_limits<float>::denorm_min(), 0.0f,
      std::numeric_limits<float>::denorm_min(), 1e-30f, 1.0f,
      std::numeric_limits<float>::max()};
  for (size_t i = 0; i < ascending.size(); ++i) {
    const uint32_t key = sparse::SignedKey(ascending[i]);
    EXPECT_EQ(Bits(sparse::KeyValue(key)), Bits(ascending[i])) << i;
    EXPECT_NE(key, sparse::kNoKey);
    EXPECT_EQ((key & sparse::kNonNegativeBit) != 0, ascending[i] >= 0.0f);
    if (i > 0) {
      EXPECT_LT(sparse::SignedKey(ascending[i - 1]), key) << i;
    }
  }
  // -0 is +0, and |v| drops the sign.
  EXPECT_EQ(sparse::SignedKey(-0.0f), sparse::SignedKey(0.0f));
  EXPECT_EQ(sparse::MagnitudeKey(-2.5f), sparse::SignedKey(2.5f));
  for (const float bad : {kNaN, -kNaN, kInf, -kInf}) {
    EXPECT_EQ(sparse::SignedKey(bad), sparse::kNoKey);
    EXPECT_EQ(sparse::MagnitudeKey(bad), sparse::kNoKey);
  }
}

TEST(SparseSelectMath, FindSampleChunkIsTheLastChunkStartingAtOrBefore) {
  const CudaSparseChunk chunks[] = {{5, 3}, {0, 0}, {0, 1}, {2, 0}, {1, 4}};
  const absl::StatusOr<SampleTable> table = PlanSampleTable(chunks, 10);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->total, 8u);
  const std::vector<uint32_t> want = {0, 0, 0, 1, 2, 2, 2, 2};
  for (uint64_t index = 0; index < table->total; ++index) {
    EXPECT_EQ(sparse::FindSampleChunk(table->chunks.data(),
                                      table->chunks.size(), index),
              want[index])
        << index;
  }
}

TEST(SparseSelectMath, LowerBoundWordFindsGroupRuns) {
  const uint32_t words[] = {sparse::KeptWord(1, sparse::kKeptNegative),
                            sparse::KeptWord(4, sparse::kKeptPositive),
                            sparse::KeptWord(5, sparse::kKeptNegative),
                            sparse::KeptWord(9, sparse::kKeptPositive)};
  EXPECT_EQ(sparse::LowerBoundWord(words, 4, 0), 0u);
  EXPECT_EQ(sparse::LowerBoundWord(words, 4, 2), 1u);
  EXPECT_EQ(sparse::LowerBoundWord(words, 4, 5), 2u);
  EXPECT_EQ(sparse::LowerBoundWord(words, 4, 6), 3u);
  EXPECT_EQ(sparse::LowerBoundWord(words, 4, 10), 4u);
  EXPECT_EQ(sparse::LowerBoundWord(words, 0, 3), 0u);
}

// ---------------------------------------------------------------------------
// Against the CPU.

TEST(SparseSelectMath, MagnitudeThresholdMatchesTheCpu) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Values(n, 11 + n, /*nonfinite=*/true);
    const CudaSparseChunk whole[] = {{0, n}};
    const absl::StatusOr<SampleTable> table = PlanSampleTable(whole, n);
    ASSERT_TRUE(table.ok());
    const absl::Span<const float> spans[] = {values};
    for (const uint32_t sample_size : kSampleSizes) {
      for (const float drop_ratio : kDropRatios) {
        EXPECT_EQ(Bits(MagnitudeOnHost(values, *table, drop_ratio,
                                       sample_size)),
                  Bits(SampledMagnitudeThreshold(spans, drop_ratio,
                                                 sample_size, kStream)))
            << "n = " << n << ", sample " << sample_size << ", R = "
            << drop_ratio;
      }
    }
  }
}

TEST(SparseSelectMath, MultiChunkMagnitudeThresholdMatchesTheCpu) {
  // Chunks of every awkward size, empty ones among them, with gaps and out
  // of order in one flat buffer.
  const uint64_t counts[] = {33, 0, 1, 31, 0, 32, 1000, (1u << 20) + 3};
  std::vector<CudaSparseChunk> chunks;
  uint64_t at = 3;
  for (const uint64_t count : counts) {
    chunks.push_back({at, count});
    at += count + 5;
  }
  std::swap(chunks[0], chunks[6]);
  const std::vector<float> buffer = Values(at, 77, /*nonfinite=*/true);
  std::vector<absl::Span<const float>> spans;
  for (const CudaSparseChunk& chunk : chunks) {
    spans.push_back(
        absl::MakeConstSpan(buffer).subspan(chunk.offset, chunk.count));
  }
  const absl::StatusOr<SampleTable> table =
      PlanSampleTable(chunks, buffer.size());
  ASSERT_TRUE(table.ok()) << table.status();
  for (const uint32_t sample_size : kSampleSizes) {
    for (const float drop_ratio : {0.0f, 0.5f, 0.99f, 0.999f}) {
      EXPECT_EQ(
          Bits(MagnitudeOnHost(buffer, *table, drop_ratio, sample_size)),
          Bits(SampledMagnitudeThreshold(spans, drop_ratio, sample_size,
                                         kStream)))
          << "sample " << sample_size << ", R = " << drop_ratio;
    }
  }
}

TEST(SparseSelectMath, SignedThresholdsMatchTheCpu) {
  std::vector<std::pair<std::string, std::vector<float>>> inputs;
  for (const uint64_t n : kSizes) {
    inputs.push_back({"n = " + std::to_string(n), Values(n, 3 + n, true)});
  }
  // Classes absent or made of zeros only.
  std::vector<float> positive = Values(1000, 8, false);
  for (float& v : positive) v = std::fabs(v);
  std::vector<float> negative = positive;
  for (float& v : negative) v = -v - 1e-3f;
  inputs.push_back({"all non-negative", positive});
  inputs.push_back({"all negative", negative});
  inputs.push_back({"zeros", {0.0f, -0.0f, -0.0f, 0.0f, kNaN}});
  inputs.push_back({"only NaN", {kNaN, kNaN, kInf}});
  for (const auto& [name, values] : inputs) {
    for (const uint32_t sample_size : kSampleSizes) {
      for (const float proportion : kProportions) {
        const SignedThresholds cpu =
            SampledSignedThresholds(values, proportion, sample_size, kStream);
        const SignedThresholds host =
            SignedOnHost(values, proportion, sample_size);
        EXPECT_EQ(Bits(host.positive), Bits(cpu.positive))
            << name << ", sample " << sample_size << ", pi = " << proportion;
        EXPECT_EQ(Bits(host.negative), Bits(cpu.negative))
            << name << ", sample " << sample_size << ", pi = " << proportion;
      }
    }
  }
}

TEST(SparseSelectMath, DroppingPayloadsMatchTheCpu) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Values(n, 21 + n, /*nonfinite=*/false);
    const CudaSparseChunk whole[] = {{0, n}};
    const absl::StatusOr<SampleTable> table = PlanSampleTable(whole, n);
    ASSERT_TRUE(table.ok());
    for (const bool quantize : {false, true}) {
      for (const float drop_ratio : {0.0f, 0.5f, 0.99f}) {
        for (const uint32_t sample_size : {33u, 4096u, 1u << 21}) {
          for (const float global : {0.0f, 0.75f}) {
            CodecOptions options;
            options.id = CodecId::kDropping;
            options.drop_ratio = drop_ratio;
            options.drop_survivors =
                quantize ? DropSurvivors::k1Bit : DropSurvivors::kValues;
            options.sample_size = sample_size;
            EncodeContext context;
            context.stream = kStream;
            context.threshold = global;
            absl::StatusOr<std::unique_ptr<Codec>> codec =
                MakeDroppingCodec(options);
            ASSERT_TRUE(codec.ok()) << codec.status();
            absl::StatusOr<Payload> cpu = (*codec)->Encode(values, context);
            ASSERT_TRUE(cpu.ok()) << cpu.status();

            const float t =
                global > 0.0f
                    ? global
                    : MagnitudeOnHost(values, *table, drop_ratio, sample_size);
            const Payload host = EncodeOnHost(
                CodecId::kDropping,
                quantize ? Layout::kIndexSign : Layout::kIndexValue,
                SparseGroupSize(0, n), values, t, -t);
            ExpectSamePayload(host, *cpu,
                              "n = " + std::to_string(n) +
                                  (quantize ? ", quantized" : "") + ", R = " +
                                  std::to_string(drop_ratio) + ", sample " +
                                  std::to_string(sample_size) + ", global " +
                                  std::to_string(global));
          }
        }
      }
    }
  }
}

TEST(SparseSelectMath, AdaptivePayloadsMatchTheCpu) {
  for (const uint64_t n : kSizes) {
    const std::vector<float> values = Values(n, 31 + n, /*nonfinite=*/false);
    for (const float proportion : {1.0f / 64, 0.5f, 1.0f}) {
      for (const uint32_t sample_size : {33u, 4096u, 1u << 21}) {
        for (const uint64_t group_size : {0ull, 1ull, 7ull, 1000ull,
                                          (1ull << 21)}) {
          CodecOptions options;
          options.id = CodecId::kAdaptive;
          options.proportion = proportion;
          options.sample_size = sample_size;
          EncodeContext context;
          context.stream = kStream;
          context.group_size = group_size;
          absl::StatusOr<std::unique_ptr<Codec>> codec =
              MakeAdaptiveCodec(options);
          ASSERT_TRUE(codec.ok()) << codec.status();
          absl::StatusOr<Payload> cpu = (*codec)->Encode(values, context);
          ASSERT_TRUE(cpu.ok()) << cpu.status();

          const SignedThresholds t =
              SignedOnHost(values, proportion, sample_size);
          const Payload host =
              EncodeOnHost(CodecId::kAdaptive, Layout::kIndexSign,
                           SparseGroupSize(group_size, n), values, t.positive,
                           t.negative);
          ExpectSamePayload(host, *cpu,
                            "n = " + std::to_string(n) + ", pi = " +
                                std::to_string(proportion) + ", sample " +
                                std::to_string(sample_size) + ", group " +
                                std::to_string(group_size));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels

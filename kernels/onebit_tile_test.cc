// The 1-bit CUDA encoder's decomposition, run on the host: every pass of
// onebit_gpu.cu over an emulated grid (CTAs of 256 threads, warps of 32,
// the warp reductions as plain folds, the atomics as plain arithmetic),
// calling the same per-thread functions as the kernels
// (onebit_tile_cuda.h), must give the CPU codec's payloads and error
// feedback's residual bit for bit. This checks the tables, the element and
// draw ranges, the group runs and the warp-uniform paths without a GPU;
// onebit_gpu_test.cc checks the device itself where there is one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/error_feedback.h"
#include "kernels/onebit_codec.h"
#include "kernels/onebit_cuda_plan.h"
#include "kernels/onebit_tile_cuda.h"
#include "kernels/payload.h"
#include "kernels/twin_test_util.h"

namespace tern::kernels {
namespace {

using ::testing::HasSubstr;
using twin_test::Bits;
using twin_test::CpuOneBitCodec;
using twin_test::ExpectSamePayload;
using twin_test::OneBitGradient;
using onebit_tile::DrawTile;
using onebit_tile::ElementTile;
using onebit_tile::RunSums;

constexpr uint32_t kThreads = cuda::kOneBitThreads;
constexpr uint32_t kWarps = kThreads / onebit_tile::kWarp;
constexpr uint64_t kNone = ~uint64_t{0};

const RandomStream kStream{
    .seed = 0x0123456789ABCDEFull, .step = 17, .chunk = 0, .worker = 3};

// The atomics of one launch, as plain arithmetic on the host.
struct HostSink {
  cuda::OneBitGroupSums* groups;  // the chunk's first group
  uint64_t* first_bad;

  void Max(uint64_t g, uint32_t max_bits) const {
    groups[g].max_bits = std::max(groups[g].max_bits, max_bits);
  }
  void Sums(uint64_t g, const RunSums& sums) const {
    groups[g].positive += static_cast<uint64_t>(sums.positive);
    groups[g].negative += static_cast<uint64_t>(sums.negative);
    groups[g].positives += sums.positives;
  }
  void Bad(uint64_t flat) const { *first_bad = std::min(*first_bad, flat); }
};

RunSums Fold(RunSums a, const RunSums& b) {
  a.positive += b.positive;
  a.negative += b.negative;
  a.positives += b.positives;
  return a;
}

// What the six launches leave behind.
struct Emulated {
  std::vector<uint8_t> packed;
  std::vector<float> means;
  std::vector<float> next_residual;
  uint64_t first_bad = kNone;
  uint64_t residual_bad = kNone;
};

uint32_t CtasOf(const std::vector<uint32_t>& first_cta, uint32_t total,
                size_t c) {
  return (c + 1 < first_cta.size() ? first_cta[c + 1] : total) - first_cta[c];
}

// Runs onebit_gpu.cu's passes for `plan` over an emulated grid.
Emulated Emulate(const OneBitCudaPlan& plan, const cuda::OneBitInputs& in,
                 uint64_t num_values) {
  Emulated out;
  out.packed.assign(plan.packed_bytes, 0xAB);  // the kernels write every byte
  out.means.assign(2 * plan.num_groups, std::nanf(""));
  std::vector<cuda::OneBitGroupSums> groups(plan.num_groups,
                                            cuda::OneBitGroupSums{});

  // Runs `lane(chunk, t, sink)` for every thread of every warp of the
  // element grid, then `warp(chunk, tiles, results, sink)` per warp.
  const auto element_pass = [&](auto lane, auto warp) {
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const cuda::OneBitChunk& chunk = plan.chunks[c];
      HostSink sink{groups.data() + chunk.first_group, &out.first_bad};
      for (uint32_t cta = 0;
           cta < CtasOf(plan.element_first_cta, plan.element_ctas, c); ++cta) {
        for (uint32_t w = 0; w < kWarps; ++w) {
          std::vector<ElementTile> tiles;
          std::vector<decltype(lane(chunk, ElementTile{}, sink))> results;
          for (uint32_t l = 0; l < onebit_tile::kWarp; ++l) {
            ElementTile t;
            if (!onebit_tile::LocateElements(chunk, cta,
                                             w * onebit_tile::kWarp + l, &t)) {
              ASSERT_EQ(l, 0u) << "a warp's lanes disagree on being active";
              break;
            }
            if (!onebit_tile::TakesPart(t)) continue;
            tiles.push_back(t);
            results.push_back(lane(chunk, t, sink));
          }
          if (!tiles.empty()) warp(chunk, tiles, results, sink);
        }
      }
    }
  };
  const auto draw_pass = [&](auto lane, auto warp) {
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const cuda::OneBitChunk& chunk = plan.chunks[c];
      HostSink sink{groups.data() + chunk.first_group, &out.first_bad};
      for (uint32_t cta = 0;
           cta < CtasOf(plan.draw_first_cta, plan.draw_ctas, c); ++cta) {
        for (uint32_t w = 0; w < kWarps; ++w) {
          std::vector<DrawTile> tiles;
          std::vector<decltype(lane(chunk, DrawTile{}, sink))> results;
          for (uint32_t l = 0; l < onebit_tile::kWarp; ++l) {
            DrawTile t;
            if (!onebit_tile::LocateDraws(chunk, cta,
                                          w * onebit_tile::kWarp + l, &t)) {
              break;
            }
            tiles.push_back(t);
            results.push_back(lane(chunk, t, sink));
          }
          if (!tiles.empty()) warp(chunk, tiles, results, sink);
        }
      }
    }
  };
  const auto max_bits_of = [&](const cuda::OneBitChunk& chunk) {
    return [&groups, first = chunk.first_group](uint64_t g) {
      return groups[first + g].max_bits;
    };
  };

  // 1. GroupMaxKernel.
  element_pass(
      [&](const cuda::OneBitChunk& chunk, const ElementTile& t,
          HostSink& sink) {
        return onebit_tile::GroupMaxThread(in, chunk, t, sink);
      },
      [&](const cuda::OneBitChunk& chunk, const std::vector<ElementTile>& t,
          const std::vector<onebit_tile::MaxRun>& runs, HostSink& sink) {
        if (t[0].warp_in_one_group) {
          if (onebit_tile::IsSampled(chunk, runs[0].group)) return;
          uint32_t max_bits = 0;
          for (const auto& run : runs) {
            EXPECT_EQ(run.group, t[0].warp_group);
            max_bits = std::max(max_bits, run.max_bits);
          }
          sink.Max(runs[0].group, max_bits);
          return;
        }
        for (const auto& run : runs) {
          if (!onebit_tile::IsSampled(chunk, run.group)) {
            sink.Max(run.group, run.max_bits);
          }
        }
      });
  // 2. SampleMaxKernel.
  draw_pass(
      [&](const cuda::OneBitChunk& chunk, const DrawTile& t, HostSink& sink) {
        return onebit_tile::SampleMaxThread(in, chunk, t, sink);
      },
      [&](const cuda::OneBitChunk&, const std::vector<DrawTile>& t,
          const std::vector<uint32_t>& maxima, HostSink& sink) {
        if (!t[0].warp_in_one_group) return;
        sink.Max(t[0].warp_group,
                 *std::max_element(maxima.begin(), maxima.end()));
      });
  // 3. GroupSumsKernel.
  element_pass(
      [&](const cuda::OneBitChunk& chunk, const ElementTile& t,
          HostSink& sink) {
        uint32_t byte = 0;
        const onebit_tile::SumRun run = onebit_tile::GroupSumsThread(
            in, chunk, t, max_bits_of(chunk), sink, &byte);
        if (t.n != 0) out.packed[chunk.packed_offset + t.first / 8] = byte;
        return run;
      },
      [&](const cuda::OneBitChunk&, const std::vector<ElementTile>& t,
          const std::vector<onebit_tile::SumRun>& runs, HostSink& sink) {
        if (t[0].warp_in_one_group) {
          if (!runs[0].exact) return;
          RunSums sums;
          for (const auto& run : runs) sums = Fold(sums, run.sums);
          sink.Sums(runs[0].group, sums);
          return;
        }
        for (const auto& run : runs) {
          if (run.exact) sink.Sums(run.group, run.sums);
        }
      });
  // 4. SampleSumsKernel.
  draw_pass(
      [&](const cuda::OneBitChunk& chunk, const DrawTile& t, HostSink& sink) {
        return onebit_tile::SampleSumsThread(in, chunk, t, max_bits_of(chunk),
                                             sink);
      },
      [&](const cuda::OneBitChunk&, const std::vector<DrawTile>& t,
          const std::vector<RunSums>& parts, HostSink& sink) {
        if (!t[0].warp_in_one_group) return;
        RunSums sums;
        for (const RunSums& part : parts) sums = Fold(sums, part);
        if (!sums.Empty()) sink.Sums(t[0].warp_group, sums);
      });
  // 5. MeansKernel.
  for (const cuda::OneBitChunk& chunk : plan.chunks) {
    for (uint64_t g = 0; g < onebit_tile::NumGroups(chunk); ++g) {
      const cuda::OneBitGroupSums& sums = groups[chunk.first_group + g];
      onebit_tile::GroupMeansOf(
          chunk, g, sums.max_bits, static_cast<int64_t>(sums.positive),
          static_cast<int64_t>(sums.negative), sums.positives,
          out.means.data() + 2 * (chunk.first_group + g));
    }
  }
  // 6. ResidualKernel.
  if (in.residual != nullptr) {
    out.next_residual.assign(num_values, std::nanf(""));
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const cuda::OneBitChunk& chunk = plan.chunks[c];
      HostSink sink{nullptr, &out.residual_bad};
      for (uint32_t cta = 0;
           cta < CtasOf(plan.element_first_cta, plan.element_ctas, c); ++cta) {
        for (uint32_t thread = 0; thread < kThreads; ++thread) {
          ElementTile t;
          if (!onebit_tile::LocateElements(chunk, cta, thread, &t)) continue;
          onebit_tile::ResidualThread(
              in, chunk, t, out.means.data() + 2 * chunk.first_group,
              out.next_residual.data(), sink);
        }
      }
    }
  }
  return out;
}

cuda::OneBitInputs InputsOf(const std::vector<float>& values,
                            const std::vector<float>* residual,
                            const OneBitCudaPlan& plan,
                            const RandomStream& stream) {
  return cuda::OneBitInputs{values.data(),
                            residual == nullptr ? nullptr : residual->data(),
                            plan.chunks.data(),
                            static_cast<uint32_t>(plan.chunks.size()),
                            stream.seed,
                            stream.step,
                            stream.worker};
}

EncodeContext ContextOf(const CudaOneBitChunk& chunk,
                        const RandomStream& stream) {
  EncodeContext context;
  context.stream = stream;
  context.stream.chunk = chunk.key;
  context.group_size = chunk.group_size;
  return context;
}

// Chunks of `counts` laid end to end from `first`, with their groups.
std::vector<CudaOneBitChunk> Lay(absl::Span<const uint64_t> counts,
                                 absl::Span<const uint64_t> groups,
                                 uint64_t first, uint64_t* total) {
  std::vector<CudaOneBitChunk> chunks;
  *total = first;
  for (size_t c = 0; c < counts.size(); ++c) {
    chunks.push_back({.key = static_cast<uint32_t>(c + 1),
                      .offset = *total,
                      .count = counts[c],
                      .group_size = groups[c]});
    *total += counts[c];
  }
  return chunks;
}

void CheckEncode(const std::vector<float>& values,
                 const std::vector<CudaOneBitChunk>& chunks,
                 uint32_t sample_size, const std::string& where) {
  absl::StatusOr<OneBitCudaPlan> plan =
      PlanOneBitCuda(chunks, values.size(), sample_size, false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Emulated out =
      Emulate(*plan, InputsOf(values, nullptr, *plan, kStream), values.size());
  EXPECT_EQ(out.first_bad, kNone) << where;
  const std::vector<Payload> payloads =
      OneBitPayloads(*plan, out.packed, out.means);
  const std::unique_ptr<Codec> cpu = CpuOneBitCodec(sample_size);
  for (size_t c = 0; c < chunks.size(); ++c) {
    absl::StatusOr<Payload> want = cpu->Encode(
        absl::MakeConstSpan(values).subspan(chunks[c].offset, chunks[c].count),
        ContextOf(chunks[c], kStream));
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectSamePayload(payloads[c], *want, absl::StrCat(where, " chunk ", c));
  }
}

// ---------------------------------------------------------------------------

TEST(OneBitTileTest, OneChunkOfEachSizeMatchesTheCpu) {
  for (const uint64_t n : {0, 1, 31, 32, 33, 1000, 70000}) {
    const std::vector<float> values =
        OneBitGradient(n, static_cast<uint32_t>(n));
    for (const uint64_t group : {0, 1, 7, 64, 1000, 5000}) {
      for (const uint32_t sample : {0u, 99u, 4096u}) {
        uint64_t total = 0;
        CheckEncode(values, Lay({n}, {group}, 0, &total), sample,
                    absl::StrCat("n ", n, " group ", group, " sample ", sample));
      }
    }
  }
}

TEST(OneBitTileTest, AMillionValuesInOneGroupOrInRowsMatchTheCpu) {
  const uint64_t n = (uint64_t{1} << 20) + 3;
  const std::vector<float> values = OneBitGradient(n, 20);
  for (const uint64_t group : {0, 1000}) {
    for (const uint32_t sample : {0u, 4096u}) {
      uint64_t total = 0;
      CheckEncode(values, Lay({n}, {group}, 0, &total), sample,
                  absl::StrCat("group ", group, " sample ", sample));
    }
  }
}

TEST(OneBitTileTest, ManyChunksFromAMisalignedOffsetMatchTheCpu) {
  const uint64_t counts[] = {0, 1, 31, 32, 33, 1000, 70000, 5000, 0, 9};
  const uint64_t groups[] = {0, 1, 7, 64, 0, 33, 0, 1000, 3, 2};
  uint64_t total = 0;
  const std::vector<CudaOneBitChunk> chunks = Lay(counts, groups, 3, &total);
  const std::vector<float> values = OneBitGradient(total, 99);
  for (const uint32_t sample : {0u, 99u, 4096u}) {
    CheckEncode(values, chunks, sample, absl::StrCat("sample ", sample));
  }
}

TEST(OneBitTileTest, ErrorFeedbackKeepsTheCpuResidualOverSteps) {
  const uint64_t counts[] = {33, 70000, 5000};
  const uint64_t groups[] = {0, 0, 64};
  for (const uint32_t sample : {0u, 99u}) {
    uint64_t total = 0;
    const std::vector<CudaOneBitChunk> chunks = Lay(counts, groups, 0, &total);
    absl::StatusOr<OneBitCudaPlan> plan =
        PlanOneBitCuda(chunks, total, sample, true);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ErrorFeedback cpu(CpuOneBitCodec(sample));
    for (const CudaOneBitChunk& chunk : chunks) {
      ASSERT_TRUE(cpu.Register(chunk.key, chunk.count).ok());
    }
    std::vector<float> residual(total, 0.0f);
    for (uint32_t step = 0; step < 3; ++step) {
      const std::vector<float> gradient = OneBitGradient(total, 1000 + step);
      RandomStream stream = kStream;
      stream.step = step;
      const Emulated out =
          Emulate(*plan, InputsOf(gradient, &residual, *plan, stream), total);
      ASSERT_EQ(out.first_bad, kNone);
      ASSERT_EQ(out.residual_bad, kNone);
      const std::vector<Payload> payloads =
          OneBitPayloads(*plan, out.packed, out.means);
      residual = out.next_residual;
      for (size_t c = 0; c < chunks.size(); ++c) {
        const CudaOneBitChunk& chunk = chunks[c];
        std::vector<float> compensated(
            gradient.begin() + chunk.offset,
            gradient.begin() + chunk.offset + chunk.count);
        ASSERT_TRUE(cpu.Compensate(chunk.key, absl::MakeSpan(compensated)).ok());
        absl::StatusOr<Payload> want = cpu.EncodeCompensated(
            chunk.key, compensated, ContextOf(chunk, stream));
        ASSERT_TRUE(want.ok()) << want.status();
        const std::string where =
            absl::StrCat("sample ", sample, " step ", step, " chunk ", c);
        ExpectSamePayload(payloads[c], *want, where);
        absl::StatusOr<absl::Span<const float>> cpu_residual =
            cpu.Residual(chunk.key);
        ASSERT_TRUE(cpu_residual.ok());
        for (uint64_t i = 0; i < chunk.count; ++i) {
          ASSERT_EQ(Bits(residual[chunk.offset + i]),
                    Bits((*cpu_residual)[i]))
              << where << " element " << i;
        }
      }
    }
  }
}

TEST(OneBitTileTest, TheFirstNonFiniteValueIsFound) {
  std::vector<float> values = OneBitGradient(3000, 5);
  values[2700] = std::numeric_limits<float>::infinity();
  values[2500] = std::numeric_limits<float>::quiet_NaN();
  uint64_t total = 0;
  const std::vector<CudaOneBitChunk> chunks =
      Lay({2000, 1000}, {0, 64}, 0, &total);
  absl::StatusOr<OneBitCudaPlan> plan = PlanOneBitCuda(chunks, total, 0, false);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Emulate(*plan, InputsOf(values, nullptr, *plan, kStream), total)
                .first_bad,
            2500u);
}

// ---------------------------------------------------------------------------
// The tables.

TEST(OneBitCudaPlan, GivesEveryChunkItsGroupsBytesAndCtas) {
  const CudaOneBitChunk chunks[] = {
      {.key = 4, .offset = 0, .count = 5000, .group_size = 1000},
      {.key = 5, .offset = 5000, .count = 0, .group_size = 0},
      {.key = 6, .offset = 5000, .count = 33, .group_size = 0}};
  absl::StatusOr<OneBitCudaPlan> plan = PlanOneBitCuda(chunks, 5033, 100, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->chunks.size(), 3u);
  EXPECT_EQ(plan->chunks[0].group_size, 1000u);
  EXPECT_EQ(plan->chunks[1].group_size, 1u);  // OneBitGroupSize of nothing
  EXPECT_EQ(plan->chunks[2].group_size, 33u);
  EXPECT_EQ(plan->chunks[2].first_group, 5u);
  EXPECT_EQ(plan->num_groups, 6u);
  EXPECT_EQ(plan->chunks[2].packed_offset, 625u);
  EXPECT_EQ(plan->packed_bytes, 625u + 5u);
  EXPECT_EQ(plan->element_first_cta, (std::vector<uint32_t>{0, 3, 3}));
  EXPECT_EQ(plan->element_ctas, 4u);
  // 5 groups x 100 draws in one CTA; the 33-element group is not sampled.
  EXPECT_EQ(plan->draw_first_cta, (std::vector<uint32_t>{0, 1, 1}));
  EXPECT_EQ(plan->draw_ctas, 1u);
}

TEST(OneBitCudaPlan, RejectsBadTables) {
  const CudaOneBitChunk outside[] = {{.key = 9, .offset = 10, .count = 5}};
  absl::Status status = PlanOneBitCuda(outside, 14, 0, false).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("key 9"));

  const CudaOneBitChunk overflow[] = {
      {.key = 1, .offset = ~uint64_t{0}, .count = 2}};
  EXPECT_EQ(PlanOneBitCuda(overflow, 100, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);

  const CudaOneBitChunk overlap[] = {{.key = 1, .offset = 0, .count = 10},
                                     {.key = 2, .offset = 9, .count = 10}};
  EXPECT_TRUE(PlanOneBitCuda(overlap, 19, 0, false).ok());
  status = PlanOneBitCuda(overlap, 19, 0, true).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("overlap"));
}

}  // namespace
}  // namespace tern::kernels

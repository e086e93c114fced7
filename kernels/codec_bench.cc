// Codec throughput on one core (BENCHMARKS.md, "Kernels"): every stage of
// every codec, next to a plain memcpy and a read-only float sum over the
// same fp32 buffer, all measured in this run. Every stage reports the fp32
// input bytes it stands for per second, so the ratios compare like with
// like. After the usual Google Benchmark output, a table gives each stage's
// GB/s and its ratio to memcpy and to the read-only sum, per size.
//
//   bazel run -c opt //kernels:codec_bench -- --benchmark_filter=/1048576
//   taskset -c 0 bazel-bin/kernels/codec_bench   # pin to one core
//
// fp32/encode makes a fresh Payload per call, as the worker's step does;
// fp32/encode_reused writes into one kept across calls
// (Codec::EncodeInto). Under glibc's default policy they differ above its
// mmap threshold (32 MiB, e.g. 2^24 floats), where each fresh payload is
// new pages that the kernel faults in and zeroes (0.02 of memcpy on this
// project's VMs); this binary, like tern, runs under the allocator policy
// of common/process/allocator.h, which keeps freed memory in the process.
//
// Sizes are 2^10 .. 2^26 elements in steps of x4 for TernGrad, fp32 and
// fp16; every other codec of the registry (the compressors of DESIGN
// section 6) runs at 2^20 and 2^24: encode, decode, the worker's encode
// with error feedback where the codec uses it, and the shard's re-encoding
// aggregation of kWorkers pushes. Codecs the registry has not built are
// skipped, and the output says so. Each benchmark runs for 0.1 s unless
// --benchmark_min_time says otherwise. A filter should keep memcpy, or the
// ratio columns stay empty:
//
//   codec_bench --benchmark_filter='^(memcpy|read_sum|onebit/.*)/1048576$'
#include "kernels/codec_bench.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "common/philox.h"
#include "kernels/codec.h"
#include "kernels/codec_registry.h"
#include "kernels/error_feedback.h"
#include "kernels/sum_huffman.h"
#include "kernels/terngrad.h"
#include "kernels/terngrad_simd.h"

namespace tern::kernels {
namespace {

// Workers per step for the sums' stages: 4 gives 4-bit SUM_BITS fields and
// 20 radix-9 digits per word.
constexpr uint32_t kWorkers = 4;

const RandomStream kStream{.seed = 1, .step = 2, .chunk = 3, .worker = 0};

// A gradient-like buffer, made fast enough for 2^26 elements: a xorshift
// generator, values spread over [-0.01, 0.01) with the odd outlier that
// clipping cuts.
std::vector<float> Gradient(size_t n, uint32_t seed) {
  std::vector<float> g(n);
  uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float unit =
        static_cast<float>(state >> 40) * (1.0f / 16777216.0f) - 0.5f;
    g[i] = (i % 97 == 0 ? 0.5f : 0.02f) * unit;
  }
  return g;
}

void SetFp32Bytes(benchmark::State& state, size_t n, double per_iteration = 1) {
  state.SetBytesProcessed(static_cast<int64_t>(
      static_cast<double>(state.iterations()) * per_iteration * n * 4));
}

std::unique_ptr<Codec> Make(CodecId id, Layout push = Layout::kUnspecified,
                            Layout pull = Layout::kUnspecified) {
  CodecOptions options;
  options.id = id;
  options.push_layout = push;
  options.pull_layout = pull;
  return *MakeCodec(options);
}

// ---------------------------------------------------------------------------
// References

void Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> in = Gradient(n, 0);
  std::vector<float> out(n, 0.0f);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), n * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
}

void ReadSum(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> in = Gradient(n, 0);
  for (auto _ : state) {
    // Independent lanes, so the loop is bound by reading, not by one add
    // chain.
    float lanes[16] = {};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      for (int l = 0; l < 16; ++l) lanes[l] += in[i + l];
    }
    for (; i < n; ++i) lanes[0] += in[i];
    float total = 0.0f;
    for (const float lane : lanes) total += lane;
    benchmark::DoNotOptimize(total);
  }
  SetFp32Bytes(state, n);
}

// ---------------------------------------------------------------------------
// TernGrad kernels

void Stats(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> g = Gradient(n, 0);
  for (auto _ : state) {
    ChunkStats stats = ComputeStats(g);
    benchmark::DoNotOptimize(stats);
  }
  SetFp32Bytes(state, n);
}

void QuantizePackStage(benchmark::State& state, Layout layout) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> g = Gradient(n, 0);
  std::vector<uint8_t> out(PackedTernaryBytes(n, layout), 0);
  for (auto _ : state) {
    QuantizePack(g, 0.01f, kStream, layout, absl::MakeSpan(out));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
}

#if TERN_KERNELS_X86
// One SIMD variant alone, to show what each instruction set buys.
using TwoBitKernel = size_t (*)(const float*, size_t, uint32_t, float, float,
                                const RandomStream&, uint8_t*);

void TwoBitVariant(benchmark::State& state, TwoBitKernel kernel,
                   bool supported) {
  if (!supported) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> g = Gradient(n, 0);
  std::vector<uint8_t> out(n / 4 + 1, 0);
  for (auto _ : state) {
    const size_t done =
        kernel(g.data(), n, 0, 0.01f, 0.01f, kStream, out.data());
    benchmark::DoNotOptimize(done);
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
}
#endif

// Stats, local scaler, quantize and pack, payload: what a worker runs per
// chunk without scaler sharing.
void EncodeStage(benchmark::State& state, CodecId id, Layout push) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> g = Gradient(n, 0);
  const std::unique_ptr<Codec> codec = Make(id, push);
  EncodeContext context;
  context.stream = kStream;
  for (auto _ : state) {
    absl::StatusOr<Payload> payload = codec->Encode(g, context);
    benchmark::DoNotOptimize(payload->data.data());
  }
  SetFp32Bytes(state, n);
}

// The same into one Payload kept across iterations (Codec::EncodeInto), as
// a worker that keeps each chunk's payload from step to step would run it.
// One untimed call first sizes the payload: the timed ones are the steady
// state, whatever the iteration count.
void EncodeReusedStage(benchmark::State& state, CodecId id) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> g = Gradient(n, 0);
  const std::unique_ptr<Codec> codec = Make(id);
  EncodeContext context;
  context.stream = kStream;
  Payload payload;
  if (!codec->EncodeInto(g, context, &payload).ok()) {
    state.SkipWithError("the untimed first encode failed");
    return;
  }
  for (auto _ : state) {
    const absl::Status status = codec->EncodeInto(g, context, &payload);
    benchmark::DoNotOptimize(status.ok());
    benchmark::DoNotOptimize(payload.data.data());
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
}

std::vector<uint8_t> PackedPush(size_t n, Layout layout) {
  std::vector<uint8_t> packed(PackedTernaryBytes(n, layout));
  QuantizePack(Gradient(n, 1), 0.01f, kStream, layout, absl::MakeSpan(packed));
  return packed;
}

// One worker's push added into the server's int32 sums.
void Accumulate(benchmark::State& state, Layout layout) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<uint8_t> packed = PackedPush(n, layout);
  std::vector<int32_t> sums(n, 0);
  for (auto _ : state) {
    const absl::Status status =
        AccumulateTernary(packed, n, layout, absl::MakeSpan(sums));
    benchmark::DoNotOptimize(status.ok());
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
}

// The scaler of the synthetic pushes: most of these gradients' codes are
// nonzero (about three in four). With kSparseScaler about one in five is,
// as in LeNet's pushes on Fashion-MNIST (bench/README.md, "The push in
// fewer bits": 1.19 bits a code, nonzero with probability about 0.19),
// so their sums are spread as a real pull's.
constexpr float kDenseScaler = 0.005f;
constexpr float kSparseScaler = 0.025f;

std::vector<int32_t> Sums(size_t n, float scaler = kDenseScaler) {
  std::vector<int32_t> sums(n, 0);
  for (uint32_t w = 0; w < kWorkers; ++w) {
    std::vector<uint8_t> packed(PackedTernaryBytes(n, Layout::kTernary2Bit));
    RandomStream stream = kStream;
    stream.worker = w;
    QuantizePack(Gradient(n, w), scaler, stream, Layout::kTernary2Bit,
                 absl::MakeSpan(packed));
    (void)AccumulateTernary(packed, n, Layout::kTernary2Bit,
                            absl::MakeSpan(sums));
  }
  return sums;
}

// The pull's bytes in any sum layout.
std::vector<uint8_t> PackedPull(const std::vector<int32_t>& sums,
                                Layout layout) {
  if (layout == Layout::kSumHuffman) {
    const std::string bytes = PackSumsHuffman(sums, kWorkers);
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  }
  std::vector<uint8_t> packed(PackedSumBytes(sums.size(), kWorkers, layout));
  PackSums(sums, kWorkers, layout, absl::MakeSpan(packed));
  return packed;
}

// Also reports the pull's bits per sum (of these synthetic sums, whose
// spread is wider than real gradients': bench/README.md has LeNet's).
void PackSumsStage(benchmark::State& state, Layout layout,
                   float scaler = kDenseScaler) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<int32_t> sums = Sums(n, scaler);
  std::vector<uint8_t> out(PackedSumBytes(n, kWorkers, layout), 0);
  for (auto _ : state) {
    if (layout == Layout::kSumHuffman) {
      // A fresh string each time, as the server's aggregation makes it.
      const std::string bytes = PackSumsHuffman(sums, kWorkers);
      benchmark::DoNotOptimize(bytes.data());
    } else {
      PackSums(sums, kWorkers, layout, absl::MakeSpan(out));
      benchmark::DoNotOptimize(out.data());
    }
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
  state.counters["bits_per_sum"] =
      8.0 * static_cast<double>(PackedPull(sums, layout).size()) / n;
}

void DecodeSumsStage(benchmark::State& state, Layout layout,
                     float scaler = kDenseScaler) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<uint8_t> packed = PackedPull(Sums(n, scaler), layout);
  std::vector<float> out(n, 0.0f);
  for (auto _ : state) {
    const absl::Status status =
        DecodeSums(packed, n, kWorkers, layout, 0.01f, absl::MakeSpan(out));
    benchmark::DoNotOptimize(status.ok());
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
}

// ---------------------------------------------------------------------------
// Any codec

void DecodeStage(benchmark::State& state, CodecId id) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::unique_ptr<Codec> codec = Make(id);
  EncodeContext context;
  context.stream = kStream;
  const Payload payload = *codec->Encode(Gradient(n, 0), context);
  std::vector<float> out(n, 0.0f);
  for (auto _ : state) {
    const absl::Status status = codec->Decode(payload, absl::MakeSpan(out));
    benchmark::DoNotOptimize(status.ok());
    benchmark::ClobberMemory();
  }
  SetFp32Bytes(state, n);
}

// The server's whole step for one chunk: kWorkers pushes added, the pull
// made. Bytes count every push.
void ServerStep(benchmark::State& state, CodecId id) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::unique_ptr<Codec> codec = Make(id);
  std::vector<Payload> pushes;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EncodeContext context;
    context.stream = kStream;
    context.stream.worker = w;
    context.scaler = 0.005f;
    pushes.push_back(*codec->Encode(Gradient(n, w), context));
  }
  for (auto _ : state) {
    std::unique_ptr<Aggregation> aggregation =
        codec->NewAggregation(n, kWorkers);
    for (uint32_t w = 0; w < kWorkers; ++w) {
      benchmark::DoNotOptimize(aggregation->Add(w, pushes[w]).ok());
    }
    absl::StatusOr<Payload> pull = aggregation->Finish();
    benchmark::DoNotOptimize(pull->data.data());
  }
  SetFp32Bytes(state, n, kWorkers);
}

// ---------------------------------------------------------------------------
// The compressors: every codec of the registry but TernGrad, fp32 and fp16

// The worker's stage for a codec with error feedback: compensate the chunk
// with its residual, encode, and keep what the push did not carry (which
// decodes the push once more). Each iteration starts from the same
// gradient; that copy is not timed.
void EncodeWithFeedback(benchmark::State& state, CodecId id) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> g = Gradient(n, 0);
  ErrorFeedback feedback(Make(id));
  if (!feedback.Register(0, n).ok()) {
    state.SkipWithError("cannot register the chunk");
    return;
  }
  std::vector<float> values(n);
  EncodeContext context;
  context.stream = kStream;
  for (auto _ : state) {
    state.PauseTiming();
    std::memcpy(values.data(), g.data(), n * sizeof(float));
    state.ResumeTiming();
    const absl::Status status = feedback.Compensate(0, absl::MakeSpan(values));
    absl::StatusOr<Payload> payload =
        feedback.EncodeCompensated(0, values, context);
    benchmark::DoNotOptimize(status.ok());
    benchmark::DoNotOptimize(payload->data.data());
  }
  SetFp32Bytes(state, n);
}

// The shard's step for a codec that is not Summable(): kWorkers pushes
// decoded and averaged in worker order, the average re-encoded for the pull
// (with the shard's residual, kept across iterations as a shard keeps it
// across steps, where the codec uses error feedback). Bytes count every
// push.
void ReencodeStep(benchmark::State& state, CodecId id) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::unique_ptr<Codec> codec = Make(id);
  std::vector<Payload> pushes;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EncodeContext context;
    context.stream = kStream;
    context.stream.worker = w;
    pushes.push_back(*codec->Encode(Gradient(n, w), context));
  }
  std::vector<float> residual;
  AggregationContext context;
  context.stream = kStream;
  context.stream.worker = kShardStreamWorker;
  context.residual = &residual;
  for (auto _ : state) {
    std::unique_ptr<Aggregation> aggregation =
        codec->NewAggregation(n, kWorkers, context);
    for (uint32_t w = 0; w < kWorkers; ++w) {
      benchmark::DoNotOptimize(aggregation->Add(w, pushes[w]).ok());
    }
    absl::StatusOr<Payload> pull = aggregation->Finish();
    benchmark::DoNotOptimize(pull->data.data());
  }
  SetFp32Bytes(state, n, kWorkers);
}

// ---------------------------------------------------------------------------
// Registration and the ratio table

template <typename Fn>
void Register(const std::string& name, Fn&& fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Fn>(fn))
      ->RangeMultiplier(4)
      ->Range(1 << 10, 1 << 26);
}

// At the two sizes of the compressors' rows.
template <typename Fn>
void RegisterTwoSizes(const std::string& name, Fn&& fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Fn>(fn))
      ->Arg(1 << 20)
      ->Arg(1 << 24);
}

// The compressors' rows; returns a line for each codec the registry has
// not built.
std::vector<std::string> RegisterCompressors() {
  std::vector<std::string> skipped;
  for (const CodecId id :
       {CodecId::kOneBit, CodecId::kThreshold, CodecId::kAdaptive,
        CodecId::kDropping, CodecId::kQsgd, CodecId::kInt8}) {
    const std::string name = CodecName(id);
    CodecOptions options;
    options.id = id;
    const absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(options);
    if (!codec.ok()) {
      skipped.push_back(
          absl::StrFormat("%s: skipped (%s)", name, codec.status().ToString()));
      continue;
    }
    RegisterTwoSizes(name + "/encode", [id](benchmark::State& s) {
      EncodeStage(s, id, Layout::kUnspecified);
    });
    if ((*codec)->UsesErrorFeedback()) {
      RegisterTwoSizes(
          name + "/encode_error_feedback",
          [id](benchmark::State& s) { EncodeWithFeedback(s, id); });
    }
    RegisterTwoSizes(name + "/decode",
                     [id](benchmark::State& s) { DecodeStage(s, id); });
    if (!(*codec)->Summable()) {
      RegisterTwoSizes(name + "/server_step",
                       [id](benchmark::State& s) { ReencodeStep(s, id); });
    }
  }
  return skipped;
}

// The worker's side of TernGrad: statistics, quantize+pack (each SIMD
// variant this CPU has), the whole encode.
void RegisterTernGradEncode() {
  Register("terngrad/stats", Stats);
  Register("terngrad/quantize_pack_2bit", [](benchmark::State& s) {
    QuantizePackStage(s, Layout::kTernary2Bit);
  });
  Register("terngrad/quantize_pack_base3", [](benchmark::State& s) {
    QuantizePackStage(s, Layout::kTernaryBase3);
  });
#if TERN_KERNELS_X86
  Register("terngrad/quantize_pack_2bit_sse2", [](benchmark::State& s) {
    TwoBitVariant(s, simd::TwoBitSse2, true);
  });
  Register("terngrad/quantize_pack_2bit_avx2", [](benchmark::State& s) {
    TwoBitVariant(s, simd::TwoBitAvx2, simd::CpuHasAvx2());
  });
  Register("terngrad/quantize_pack_2bit_avx512", [](benchmark::State& s) {
    TwoBitVariant(s, simd::TwoBitAvx512, simd::CpuHasAvx512());
  });
#endif
  Register("terngrad/encode_2bit", [](benchmark::State& s) {
    EncodeStage(s, CodecId::kTernGrad, Layout::kTernary2Bit);
  });
  Register("terngrad/encode_base3", [](benchmark::State& s) {
    EncodeStage(s, CodecId::kTernGrad, Layout::kTernaryBase3);
  });
}

// The shard's and the pull's side of TernGrad: summing pushes, packing and
// decoding the sums, the shard's step.
void RegisterTernGradSums() {
  Register("terngrad/accumulate_2bit",
           [](benchmark::State& s) { Accumulate(s, Layout::kTernary2Bit); });
  Register("terngrad/accumulate_base3",
           [](benchmark::State& s) { Accumulate(s, Layout::kTernaryBase3); });
  Register("terngrad/pack_sums_bits",
           [](benchmark::State& s) { PackSumsStage(s, Layout::kSumBits); });
  Register("terngrad/pack_sums_radix",
           [](benchmark::State& s) { PackSumsStage(s, Layout::kSumRadix); });
  Register("terngrad/decode_sums_bits",
           [](benchmark::State& s) { DecodeSumsStage(s, Layout::kSumBits); });
  Register("terngrad/decode_sums_radix",
           [](benchmark::State& s) { DecodeSumsStage(s, Layout::kSumRadix); });
  Register("terngrad/pack_sums_huffman",
           [](benchmark::State& s) { PackSumsStage(s, Layout::kSumHuffman); });
  Register("terngrad/decode_sums_huffman", [](benchmark::State& s) {
    DecodeSumsStage(s, Layout::kSumHuffman);
  });
  // Sums spread as LeNet's are: shorter codes, more of them a lookup.
  Register("terngrad/pack_sums_huffman_sparse", [](benchmark::State& s) {
    PackSumsStage(s, Layout::kSumHuffman, kSparseScaler);
  });
  Register("terngrad/decode_sums_huffman_sparse", [](benchmark::State& s) {
    DecodeSumsStage(s, Layout::kSumHuffman, kSparseScaler);
  });
  Register("terngrad/server_step",
           [](benchmark::State& s) { ServerStep(s, CodecId::kTernGrad); });
}

// fp32 and fp16: copies and conversions, which should run at memcpy's speed.
void RegisterFloatCodecs() {
  for (const CodecId id : {CodecId::kFp32, CodecId::kFp16}) {
    const std::string name = CodecName(id);
    Register(name + "/encode", [id](benchmark::State& s) {
      EncodeStage(s, id, Layout::kUnspecified);
    });
    if (id == CodecId::kFp32) {
      Register(name + "/encode_reused",
               [id](benchmark::State& s) { EncodeReusedStage(s, id); });
    }
    Register(name + "/decode",
             [id](benchmark::State& s) { DecodeStage(s, id); });
    Register(name + "/server_step",
             [id](benchmark::State& s) { ServerStep(s, id); });
  }
}

void RegisterAll() {
  Register("memcpy", Memcpy);
  Register("read_sum", ReadSum);
  RegisterTernGradEncode();
  RegisterTernGradSums();
  RegisterFloatCodecs();
  // A TernGrad push read back (a WeightGrad local server applies each one).
  RegisterTwoSizes("terngrad/decode_2bit", [](benchmark::State& s) {
    DecodeStage(s, CodecId::kTernGrad);
  });
}

// Prints the usual console output and keeps each run's bytes per second.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      const auto rate = run.counters.find("bytes_per_second");
      if (rate == run.counters.end()) continue;
      const int64_t size = std::stoll(run.run_name.args);
      rates_[size].emplace_back(run.run_name.function_name, rate->second.value);
    }
  }

  // One table per size: stage, GB/s, x memcpy, x read_sum.
  void PrintRatios() const {
    for (const auto& [size, stages] : rates_) {
      double memcpy_rate = 0, read_rate = 0;
      for (const auto& [name, rate] : stages) {
        if (name == "memcpy") memcpy_rate = rate;
        if (name == "read_sum") read_rate = rate;
      }
      std::printf("\nn = %lld floats (%.1f MiB fp32)\n",
                  static_cast<long long>(size), size * 4.0 / (1 << 20));
      std::printf("%-36s %9s %10s %10s\n", "stage", "GB/s", "/memcpy",
                  "/read_sum");
      for (const auto& [name, rate] : stages) {
        std::printf("%-36s %9.2f %10s %10s\n", name.c_str(), rate / 1e9,
                    Ratio(rate, memcpy_rate).c_str(),
                    Ratio(rate, read_rate).c_str());
      }
    }
  }

 private:
  static std::string Ratio(double rate, double reference) {
    return reference > 0 ? absl::StrFormat("%.2f", rate / reference) : "-";
  }

  std::map<int64_t, std::vector<std::pair<std::string, double>>> rates_;
};

}  // namespace

int RunCodecBench(int argc, char** argv) {
  // A short default run; flags given on the command line win.
  std::vector<char*> args(argv, argv + argc);
  bool has_min_time = false;
  for (int i = 1; i < argc; ++i) {
    has_min_time |= std::strncmp(argv[i], "--benchmark_min_time", 20) == 0;
  }
  char default_min_time[] = "--benchmark_min_time=0.1";
  if (!has_min_time) args.insert(args.begin() + 1, default_min_time);
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  RegisterAll();
  const std::vector<std::string> skipped = RegisterCompressors();
  for (const std::string& line : skipped) std::printf("%s\n", line.c_str());
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  // Again below the table, where a reader of the results looks.
  if (!skipped.empty()) std::printf("\n");
  for (const std::string& line : skipped) std::printf("%s\n", line.c_str());
  benchmark::Shutdown();
  return 0;
}

}  // namespace tern::kernels

// Throughput of the TernGrad CUDA kernels (terngrad_cuda.h) and of onebit
// with error feedback (onebit_cuda.h) next to a
// device-to-device cudaMemcpy and a read-only reduction timed in the same
// run, on a flat gradient buffer cut into chunks as a worker's would be.
// Before any timing, the GPU's output is compared with the CPU kernels
// (terngrad.h): packed bytes, sums and decoded values bit for bit,
// statistics within a tight tolerance; a mismatch ends the run with exit
// status 1.
//
// Each stage is timed with CUDA events on the context's stream, after
// --warmup runs, as the median of --runs (at least 50) runs. "moved" counts
// the bytes a stage must read plus those it must write (a copy of B bytes
// moves 2B), so "/copy" compares like with like: quantize+pack moves
// 4.25 bytes per element, and at the copy's bandwidth would score 1.0.
// "fp32 GB/s" is the fp32 input per second, the unit of codec_bench.
//
//   bazel build -c opt --config=cuda //kernels:cuda_bench
//   bazel-bin/kernels/cuda_bench [--elements=67108864]
//   [--chunk_elements=1048576]
//
// Targets (H100): quantize+pack >= 0.80 of copy; statistics >= 0.80 of the
// read-only reduction; full encode >= 0.40 of copy.
#include "kernels/cuda_bench.h"
#include "kernels/cuda_bench_main.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "kernels/codec.h"
#include "kernels/codec_options.h"
#include "kernels/onebit_codec.h"
#include "kernels/onebit_cuda.h"
#include "kernels/payload.h"
#include "kernels/terngrad.h"
#include "kernels/terngrad_cuda.h"
#include "kernels/terngrad_cuda_launch.h"

ABSL_FLAG(uint64_t, elements, uint64_t{1} << 26,
          "gradient elements (fp32) in the flat buffer");
ABSL_FLAG(uint64_t, chunk_elements, uint64_t{1} << 20,
          "elements per chunk (4 MiB of fp32: the default partition_bytes)");
ABSL_FLAG(uint64_t, first_offset, 0,
          "elements before the first chunk (1 makes every float4 load "
          "misaligned, as a model's odd-sized tensors can)");
ABSL_FLAG(uint32_t, workers, 4, "N: pushes summed, summands of the pulls");
ABSL_FLAG(uint64_t, onebit_group, 1024,
          "onebit group (column) length; 0: a group per chunk");
ABSL_FLAG(int, runs, 100, "timed runs per stage (at least 50)");
ABSL_FLAG(int, warmup, 10, "untimed runs per stage");

namespace tern::kernels {
namespace {

const RandomStream kStream{.seed = 7, .step = 3, .chunk = 0, .worker = 0};

// Gradient-like values (as codec_bench): a xorshift generator, most values
// in [-0.01, 0.01), every 97th an outlier that clipping cuts.
std::vector<float> Gradient(uint64_t n) {
  std::vector<float> g(n);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (uint64_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float unit =
        static_cast<float>(state >> 40) * (1.0f / 16777216.0f) - 0.5f;
    g[i] = (i % 97 == 0 ? 0.5f : 0.02f) * unit;
  }
  return g;
}

#define BENCH_CHECK_OK(expr)                          \
  do {                                                \
    const absl::Status bench_status_ = (expr);        \
    if (!bench_status_.ok()) {                        \
      std::fprintf(stderr, "cuda_bench: %s\n",        \
                   bench_status_.ToString().c_str()); \
      std::exit(1);                                   \
    }                                                 \
  } while (false)

template <typename T>
T ValueOrDie(absl::StatusOr<T> value) {
  BENCH_CHECK_OK(value.status());
  return *std::move(value);
}

void Fail(const std::string& what) {
  std::fprintf(stderr, "cuda_bench: GPU and CPU differ: %s\n", what.c_str());
  std::exit(1);
}

// A table uploaded for a kernel-only launch.
template <typename Entry>
struct DeviceTable {
  DeviceArray<Entry> chunks;
  DeviceArray<uint32_t> first_cta;
  uint32_t num_chunks = 0;
  uint32_t num_ctas = 0;
};

template <typename Entry>
DeviceTable<Entry> UploadTable(const CudaLaunchTable<Entry>& table) {
  DeviceTable<Entry> device;
  device.chunks = ValueOrDie(DeviceArray<Entry>::FromHost(table.chunks));
  device.first_cta =
      ValueOrDie(DeviceArray<uint32_t>::FromHost(table.first_cta));
  device.num_chunks = static_cast<uint32_t>(table.chunks.size());
  device.num_ctas = table.num_ctas;
  return device;
}

struct Stage {
  std::string name;
  double seconds;
  double moved_bytes;
  double fp32_bytes;
};

class Timer {
 public:
  explicit Timer(cudaStream_t stream) : stream_(stream) {
    BENCH_CHECK_OK(CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"));
    BENCH_CHECK_OK(CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate"));
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  // The median seconds of `runs` runs of `enqueue` (which may also wait).
  double Median(const std::function<void()>& enqueue, int warmup, int runs) {
    for (int i = 0; i < warmup; ++i) enqueue();
    BENCH_CHECK_OK(
        CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    std::vector<double> seconds;
    for (int i = 0; i < runs; ++i) {
      BENCH_CHECK_OK(
          CudaStatus(cudaEventRecord(start_, stream_), "cudaEventRecord"));
      enqueue();
      BENCH_CHECK_OK(
          CudaStatus(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
      BENCH_CHECK_OK(
          CudaStatus(cudaEventSynchronize(stop_), "cudaEventSynchronize"));
      float ms = 0.0f;
      BENCH_CHECK_OK(CudaStatus(cudaEventElapsedTime(&ms, start_, stop_),
                                "cudaEventElapsedTime"));
      seconds.push_back(ms * 1e-3);
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// The run's settings, from the flags.
struct Settings {
  uint64_t n;  // gradient elements in the flat buffer
  uint64_t chunk_elements;
  uint64_t first;  // elements before the first chunk
  uint32_t workers;
  uint64_t onebit_group;
  int runs;
  int warmup;
};

Settings ReadSettings() {
  Settings settings;
  settings.n = absl::GetFlag(FLAGS_elements);
  settings.chunk_elements =
      std::max<uint64_t>(1, absl::GetFlag(FLAGS_chunk_elements));
  settings.first = absl::GetFlag(FLAGS_first_offset);
  settings.workers = std::max<uint32_t>(1, absl::GetFlag(FLAGS_workers));
  settings.onebit_group = absl::GetFlag(FLAGS_onebit_group);
  settings.runs = std::max(50, absl::GetFlag(FLAGS_runs));
  settings.warmup = std::max(1, absl::GetFlag(FLAGS_warmup));
  return settings;
}

void PrintHeader(const cudaDeviceProp& properties, const Settings& settings) {
  std::printf("device: %s, %d SMs, L2 %.0f MiB\n", properties.name,
              properties.multiProcessorCount,
              properties.l2CacheSize / 1048576.0);
  std::printf(
      "buffer: %llu floats (%.0f MiB) from element %llu, chunks of "
      "%llu, N = %u, median of %d runs after %d warm-up runs\n",
      static_cast<unsigned long long>(settings.n), settings.n * 4.0 / 1048576.0,
      static_cast<unsigned long long>(settings.first),
      static_cast<unsigned long long>(settings.chunk_elements),
      settings.workers, settings.runs, settings.warmup);
}

// One ternary layout's encoding of the buffer.
struct Encoded {
  Layout layout;
  std::vector<CudaEncodeChunk> chunks;
  uint64_t bytes = 0;
  DeviceArray<uint8_t> packed;
};

// One pull layout's packing of the sums.
struct Pull {
  Layout layout;
  std::vector<CudaSumChunk> chunks;
  uint64_t bytes = 0;
  DeviceArray<uint8_t> packed;
};

// What the correctness checks build and the timing reuses. The members are
// declared in the order the checks make them, so they are freed in reverse,
// before the CUDA context that Run holds.
struct Workload {
  Settings settings;
  // The flat buffer (first + n elements) and its chunks.
  std::vector<float> host;
  DeviceArray<float> values;
  std::vector<CudaStatsChunk> stats_chunks;
  std::vector<float> scalers;
  std::vector<Encoded> encodings;  // TERNARY_2BIT, then TERNARY_BASE3
  std::vector<DeviceArray<uint8_t>> pushes;
  std::vector<const uint8_t*> push_pointers;
  std::vector<CudaSumChunk> sum_chunks;
  DeviceArray<int32_t> sums;
  std::vector<int32_t> gpu_sums;
  std::vector<Pull> pulls;  // SUM_BITS, then SUM_RADIX
  DeviceArray<float> decoded;
  std::unique_ptr<OneBitCuda> onebit;
  std::vector<CudaOneBitChunk> onebit_chunks;
  DeviceArray<float> residual;
};

// The flat buffer and its chunks.
Workload MakeWorkload(const Settings& settings) {
  const uint64_t n = settings.n;
  const uint64_t chunk_elements = settings.chunk_elements;
  Workload work;
  work.settings = settings;
  work.host = Gradient(settings.first + n);
  work.values = ValueOrDie(DeviceArray<float>::FromHost(work.host));
  for (uint64_t at = 0; at < n; at += chunk_elements) {
    work.stats_chunks.push_back(
        {settings.first + at, std::min(chunk_elements, n - at)});
  }
  return work;
}

absl::Span<const float> ChunkValues(const Workload& work, size_t c) {
  return absl::MakeConstSpan(work.host).subspan(work.stats_chunks[c].offset,
                                                work.stats_chunks[c].count);
}

// Also fills work.scalers, from the GPU's statistics.
void CheckStatistics(TernGradCuda& cuda, Workload& work) {
  const std::vector<ChunkStats> stats = ValueOrDie(cuda.ComputeStats(
      work.values.data(), work.host.size(), work.stats_chunks));
  const size_t num_chunks = work.stats_chunks.size();
  work.scalers.assign(num_chunks, 0.0f);
  for (size_t c = 0; c < num_chunks; ++c) {
    const ChunkStats cpu = ComputeStats(ChunkValues(work, c));
    const double tolerance = 1e-12 * cpu.shifted_sum_squares + 1e-300;
    if (stats[c].max_abs != cpu.max_abs || stats[c].count != cpu.count ||
        stats[c].shift != cpu.shift ||
        std::fabs(stats[c].shifted_sum_squares - cpu.shifted_sum_squares) >
            tolerance) {
      Fail(absl::StrFormat("statistics of chunk %d", c));
    }
    work.scalers[c] = LocalScaler(stats[c], 2.5f);
  }
}

Encoded QuantizePackAndCheck(TernGradCuda& cuda, const Workload& work,
                             Layout layout) {
  const size_t num_chunks = work.stats_chunks.size();
  Encoded e;
  e.layout = layout;
  for (size_t c = 0; c < num_chunks; ++c) {
    e.chunks.push_back({.key = static_cast<uint32_t>(c),
                        .offset = work.stats_chunks[c].offset,
                        .count = work.stats_chunks[c].count,
                        .packed_offset = e.bytes,
                        .scaler = work.scalers[c]});
    e.bytes += PackedTernaryBytes(work.stats_chunks[c].count, layout);
  }
  e.packed = ValueOrDie(DeviceArray<uint8_t>::Allocate(e.bytes));
  BENCH_CHECK_OK(cuda.QuantizePack(work.values.data(), work.host.size(),
                                   e.chunks, kStream, layout, e.packed.data(),
                                   e.bytes));
  const std::vector<uint8_t> gpu = ValueOrDie(e.packed.ToHost());
  for (size_t c = 0; c < num_chunks; ++c) {
    RandomStream stream_c = kStream;
    stream_c.chunk = e.chunks[c].key;
    std::vector<uint8_t> cpu(PackedTernaryBytes(e.chunks[c].count, layout));
    QuantizePack(ChunkValues(work, c), work.scalers[c], stream_c, layout,
                 absl::MakeSpan(cpu));
    if (std::memcmp(cpu.data(), gpu.data() + e.chunks[c].packed_offset,
                    cpu.size()) != 0) {
      Fail(absl::StrFormat("%s bytes of chunk %d", LayoutName(layout), c));
    }
  }
  return e;
}

void CheckEncodings(TernGradCuda& cuda, Workload& work) {
  for (Layout layout : {Layout::kTernary2Bit, Layout::kTernaryBase3}) {
    work.encodings.push_back(QuantizePackAndCheck(cuda, work, layout));
  }
}

// N workers' 2-bit pushes (the same gradient, each its own stream).
void MakePushes(TernGradCuda& cuda, Workload& work) {
  const Encoded& two_bit = work.encodings[0];
  for (uint32_t w = 0; w < work.settings.workers; ++w) {
    RandomStream stream_w = kStream;
    stream_w.worker = w;
    work.pushes.push_back(
        ValueOrDie(DeviceArray<uint8_t>::Allocate(two_bit.bytes)));
    BENCH_CHECK_OK(cuda.QuantizePack(
        work.values.data(), work.host.size(), two_bit.chunks, stream_w,
        Layout::kTernary2Bit, work.pushes.back().data(), two_bit.bytes));
    work.push_pointers.push_back(work.pushes.back().data());
  }
}

std::vector<int32_t> CpuSums(const Workload& work) {
  std::vector<int32_t> cpu_sums(work.settings.n, 0);
  for (const DeviceArray<uint8_t>& push : work.pushes) {
    const std::vector<uint8_t> bytes = ValueOrDie(push.ToHost());
    for (const CudaSumChunk& chunk : work.sum_chunks) {
      BENCH_CHECK_OK(AccumulateTernary(
          absl::MakeConstSpan(bytes).subspan(
              chunk.packed_offset,
              PackedTernaryBytes(chunk.count, Layout::kTernary2Bit)),
          chunk.count, Layout::kTernary2Bit,
          absl::MakeSpan(cpu_sums).subspan(chunk.offset, chunk.count)));
    }
  }
  return cpu_sums;
}

// Also fills work.sum_chunks, work.sums and work.gpu_sums.
void CheckSums(TernGradCuda& cuda, Workload& work) {
  const uint64_t n = work.settings.n;
  const Encoded& two_bit = work.encodings[0];
  for (size_t c = 0; c < work.stats_chunks.size(); ++c) {
    work.sum_chunks.push_back(
        {.key = static_cast<uint32_t>(c),
         .packed_offset = two_bit.chunks[c].packed_offset,
         .count = work.stats_chunks[c].count,
         .offset = work.stats_chunks[c].offset - work.settings.first,
         .scaler = work.scalers[c]});
  }
  work.sums = ValueOrDie(DeviceArray<int32_t>::Allocate(n));
  BENCH_CHECK_OK(cuda.SumTernaryPushes(work.push_pointers, two_bit.bytes,
                                       work.sum_chunks, Layout::kTernary2Bit,
                                       work.sums.data(), n));
  work.gpu_sums = ValueOrDie(work.sums.ToHost());
  if (CpuSums(work) != work.gpu_sums) Fail("sums of the pushes");
}

// Decodes on the GPU into work.decoded (whose handle stays unchanged).
Pull PackAndCheckPull(TernGradCuda& cuda, const Workload& work, Layout layout) {
  const uint64_t n = work.settings.n;
  const uint32_t workers = work.settings.workers;
  Pull p;
  p.layout = layout;
  std::vector<uint8_t> bytes;
  std::vector<float> cpu_values(n);
  for (const CudaSumChunk& chunk : work.sum_chunks) {
    std::vector<uint8_t> chunk_bytes(
        PackedSumBytes(chunk.count, workers, layout));
    PackSums(
        absl::MakeConstSpan(work.gpu_sums).subspan(chunk.offset, chunk.count),
        workers, layout, absl::MakeSpan(chunk_bytes));
    BENCH_CHECK_OK(DecodeSums(
        chunk_bytes, chunk.count, workers, layout, chunk.scaler,
        absl::MakeSpan(cpu_values).subspan(chunk.offset, chunk.count)));
    CudaSumChunk pull_chunk = chunk;
    pull_chunk.packed_offset = bytes.size();
    p.chunks.push_back(pull_chunk);
    bytes.insert(bytes.end(), chunk_bytes.begin(), chunk_bytes.end());
  }
  p.bytes = bytes.size();
  p.packed = ValueOrDie(DeviceArray<uint8_t>::FromHost(bytes));
  BENCH_CHECK_OK(cuda.DecodeSums(p.packed.data(), p.bytes, p.chunks, workers,
                                 layout, work.decoded.data(), n));
  const std::vector<float> gpu_values = ValueOrDie(work.decoded.ToHost());
  if (std::memcmp(gpu_values.data(), cpu_values.data(), n * 4) != 0) {
    Fail(absl::StrFormat("decoded %s pull", LayoutName(layout)));
  }
  return p;
}

// The pulls: the sums packed on the host (the server's job).
void CheckPulls(TernGradCuda& cuda, Workload& work) {
  work.decoded = ValueOrDie(DeviceArray<float>::Allocate(work.settings.n));
  for (Layout layout : {Layout::kSumBits, Layout::kSumRadix}) {
    work.pulls.push_back(PackAndCheckPull(cuda, work, layout));
  }
}

// onebit with error feedback: the first step (zero residual) against
// the CPU codec, in groups of onebit_group (rows of a layer).
void CheckOneBit(Workload& work) {
  const uint64_t group = work.settings.onebit_group;
  const size_t num_chunks = work.stats_chunks.size();
  work.onebit = ValueOrDie(OneBitCuda::Create(0));
  for (size_t c = 0; c < num_chunks; ++c) {
    work.onebit_chunks.push_back({static_cast<uint32_t>(c),
                                  work.stats_chunks[c].offset,
                                  work.stats_chunks[c].count, group});
  }
  work.residual = ValueOrDie(
      DeviceArray<float>::FromHost(std::vector<float>(work.host.size(), 0.0f)));
  CodecOptions options;
  options.id = CodecId::kOneBit;
  const std::unique_ptr<Codec> cpu = ValueOrDie(MakeOneBitCodec(options));
  const std::vector<Payload> gpu = ValueOrDie(work.onebit->EncodeCompensated(
      work.values.data(), work.residual.data(), work.host.size(),
      work.onebit_chunks, kStream));
  for (size_t c = 0; c < num_chunks; ++c) {
    EncodeContext context;
    context.stream = kStream;
    context.stream.chunk = static_cast<uint32_t>(c);
    context.group_size = group;
    const Payload want = ValueOrDie(cpu->Encode(ChunkValues(work, c), context));
    if (gpu[c].data != want.data || gpu[c].scalers != want.scalers) {
      Fail(absl::StrFormat("onebit payload of chunk %d", c));
    }
  }
}

// Correctness first: fills `work` as it goes, for the timing.
void CheckAgainstCpu(TernGradCuda& cuda, Workload& work) {
  CheckStatistics(cuda, work);
  CheckEncodings(cuda, work);
  MakePushes(cuda, work);
  CheckSums(cuda, work);
  CheckPulls(cuda, work);
  CheckOneBit(work);
  std::printf(
      "bit-exact check against the CPU kernels: PASS (2-bit and "
      "base-3 bytes, sums of %u pushes, SUM_BITS and SUM_RADIX "
      "values, onebit bits and means; statistics within 1e-12)\n\n",
      work.settings.workers);
}

// Times the stages in the order given: the report divides by the first two
// (the references: the copy, then the read-only reduction).
class StageTimer {
 public:
  StageTimer(cudaStream_t stream, const Settings& settings)
      : timer_(stream),
        warmup_(settings.warmup),
        runs_(settings.runs),
        fp32_(4.0 * settings.n) {}

  // The bytes of the fp32 buffer, n floats.
  double fp32() const { return fp32_; }
  const std::vector<Stage>& stages() const { return stages_; }

  void Time(const std::string& name, double moved,
            const std::function<void()>& enqueue) {
    stages_.push_back(
        {name, timer_.Median(enqueue, warmup_, runs_), moved, fp32_});
  }

 private:
  Timer timer_;
  int warmup_;
  int runs_;
  double fp32_;
  std::vector<Stage> stages_;
};

// The references read n floats from the (aligned) start of the buffer.
void TimeReferences(const TernGradCuda& cuda, const cudaDeviceProp& properties,
                    const Workload& work, StageTimer& timer) {
  const uint64_t n = work.settings.n;
  const double fp32 = timer.fp32();
  const cudaStream_t stream = cuda.stream();
  DeviceArray<float> copy = ValueOrDie(DeviceArray<float>::Allocate(n));
  timer.Time("cudaMemcpy device to device", 2 * fp32, [&] {
    BENCH_CHECK_OK(
        CudaStatus(cudaMemcpyAsync(copy.data(), work.values.data(), n * 4,
                                   cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync"));
  });
  const uint32_t reduce_ctas =
      static_cast<uint32_t>(properties.multiProcessorCount) * 8;
  DeviceArray<float> partial_sums =
      ValueOrDie(DeviceArray<float>::Allocate(reduce_ctas));
  timer.Time("read-only reduction", fp32, [&] {
    BENCH_CHECK_OK(CudaStatus(
        cuda::LaunchReadOnlySum(work.values.data(), n, partial_sums.data(),
                                reduce_ctas, stream),
        "LaunchReadOnlySum"));
  });
}

// Kernels alone, with their tables already on the device.
void TimeStatisticsKernel(const TernGradCuda& cuda, const Workload& work,
                          StageTimer& timer) {
  const size_t num_chunks = work.stats_chunks.size();
  const cudaStream_t stream = cuda.stream();
  const DeviceTable<cuda::StatsChunk> table = UploadTable(
      ValueOrDie(PlanCudaStats(work.stats_chunks, work.host.size())));
  DeviceArray<tile::StatsNode> partials =
      ValueOrDie(DeviceArray<tile::StatsNode>::Allocate(table.num_ctas));
  DeviceArray<uint32_t> counters = ValueOrDie(
      DeviceArray<uint32_t>::FromHost(std::vector<uint32_t>(num_chunks, 0)));
  DeviceArray<cuda::StatsResult> results =
      ValueOrDie(DeviceArray<cuda::StatsResult>::Allocate(num_chunks));
  timer.Time("statistics (kernel)", timer.fp32(), [&] {
    BENCH_CHECK_OK(CudaStatus(
        cuda::LaunchChunkStats(work.values.data(), table.chunks.data(),
                               table.first_cta.data(), table.num_chunks,
                               table.num_ctas, partials.data(), counters.data(),
                               results.data(), stream),
        "LaunchChunkStats"));
  });
}

// As TimeStatisticsKernel: the kernel alone, its table already on the
// device.
void TimeQuantizePackKernels(const TernGradCuda& cuda, const Workload& work,
                             StageTimer& timer) {
  const cudaStream_t stream = cuda.stream();
  for (const Encoded& e : work.encodings) {
    const DeviceTable<cuda::QuantizeChunk> table = UploadTable(ValueOrDie(
        PlanCudaQuantize(e.chunks, work.host.size(), e.layout, e.bytes)));
    timer.Time(
        absl::StrFormat("quantize+pack %s (kernel)", LayoutName(e.layout)),
        timer.fp32() + e.bytes, [&] {
          BENCH_CHECK_OK(CudaStatus(
              cuda::LaunchQuantizePack(work.values.data(), table.chunks.data(),
                                       table.first_cta.data(), table.num_chunks,
                                       table.num_ctas, kStream.seed,
                                       kStream.step, kStream.worker, e.layout,
                                       e.packed.data(), stream),
              "LaunchQuantizePack"));
        });
  }
}

// What a worker calls per step: statistics back to the host, scalers
// (here the local ones; the sharing round trip is the network's), then
// the encode.
void TimeWorkerCalls(TernGradCuda& cuda, const Workload& work,
                     StageTimer& timer) {
  const double fp32 = timer.fp32();
  const size_t num_chunks = work.stats_chunks.size();
  const Encoded& two_bit = work.encodings[0];
  timer.Time("statistics (ComputeStats call)", fp32, [&] {
    ValueOrDie(cuda.ComputeStats(work.values.data(), work.host.size(),
                                 work.stats_chunks));
  });
  std::vector<CudaEncodeChunk> chunks = two_bit.chunks;
  timer.Time("full encode TERNARY_2BIT (calls)", fp32 + two_bit.bytes, [&] {
    const std::vector<ChunkStats> step_stats = ValueOrDie(cuda.ComputeStats(
        work.values.data(), work.host.size(), work.stats_chunks));
    for (size_t c = 0; c < num_chunks; ++c) {
      chunks[c].scaler = LocalScaler(step_stats[c], 2.5f);
    }
    BENCH_CHECK_OK(cuda.QuantizePack(work.values.data(), work.host.size(),
                                     chunks, kStream, Layout::kTernary2Bit,
                                     two_bit.packed.data(), two_bit.bytes));
  });
}

// onebit: reads the gradient and the residual, writes the residual and
// the sign bits (the means are noise beside them).
void TimeOneBit(const Workload& work, StageTimer& timer) {
  const double fp32 = timer.fp32();
  timer.Time(absl::StrFormat("onebit + error feedback, groups of %d (call)",
                             work.settings.onebit_group),
             3 * fp32 + fp32 / 32, [&] {
               ValueOrDie(work.onebit->EncodeCompensated(
                   work.values.data(), work.residual.data(), work.host.size(),
                   work.onebit_chunks, kStream));
             });
}

// The server side and the pull side.
void TimeServerAndPull(TernGradCuda& cuda, const Workload& work,
                       StageTimer& timer) {
  const uint64_t n = work.settings.n;
  const uint32_t workers = work.settings.workers;
  const double fp32 = timer.fp32();
  const cudaStream_t stream = cuda.stream();
  const Encoded& two_bit = work.encodings[0];
  timer.Time(absl::StrFormat("sum of %u TERNARY_2BIT pushes (call)", workers),
             workers * static_cast<double>(two_bit.bytes) + fp32, [&] {
               BENCH_CHECK_OK(cuda.SumTernaryPushes(
                   work.push_pointers, two_bit.bytes, work.sum_chunks,
                   Layout::kTernary2Bit, work.sums.data(), n));
             });
  for (const Pull& p : work.pulls) {
    const DeviceTable<cuda::SumChunk> table = UploadTable(ValueOrDie(
        PlanCudaDecodeSums(p.chunks, p.bytes, workers, p.layout, n)));
    DeviceArray<uint32_t> errors = ValueOrDie(DeviceArray<uint32_t>::FromHost(
        std::vector<uint32_t>(work.stats_chunks.size(), 0)));
    timer.Time(
        absl::StrFormat("decode %s, N = %u (kernel)", LayoutName(p.layout),
                        workers),
        p.bytes + fp32, [&] {
          BENCH_CHECK_OK(CudaStatus(
              cuda::LaunchDecodeSums(
                  p.packed.data(), table.chunks.data(), table.first_cta.data(),
                  table.num_chunks, table.num_ctas, workers, p.layout,
                  work.decoded.data(), errors.data(), stream),
              "LaunchDecodeSums"));
        });
  }
}

// The moved bytes per second of the stage `name` over `reference_rate`; 0 if
// no stage has that name.
double RatioOf(const std::vector<Stage>& stages, const std::string& name,
               double reference_rate) {
  for (const Stage& s : stages) {
    if (s.name == name) return s.moved_bytes / s.seconds / reference_rate;
  }
  return 0.0;
}

struct Target {
  std::string stage;
  bool to_copy;
  double at_least;
};

void PrintTargets(const std::vector<Stage>& stages, double copy_rate,
                  double read_rate) {
  const Target targets[] = {
      {"quantize+pack TERNARY_2BIT (kernel)", true, 0.80},
      {"statistics (kernel)", false, 0.80},
      {"full encode TERNARY_2BIT (calls)", true, 0.40},
  };
  std::printf("\ntargets (H100):\n");
  for (const Target& t : targets) {
    const double ratio =
        RatioOf(stages, t.stage, t.to_copy ? copy_rate : read_rate);
    std::printf("  %-40s %.2f of %s, target >= %.2f: %s\n", t.stage.c_str(),
                ratio, t.to_copy ? "copy" : "the read-only reduction",
                t.at_least, ratio >= t.at_least ? "met" : "NOT MET");
  }
}

// ---- Report.
void PrintReport(const std::vector<Stage>& stages) {
  const double copy_rate = stages[0].moved_bytes / stages[0].seconds;
  const double read_rate = stages[1].moved_bytes / stages[1].seconds;
  std::printf("%-42s %10s %10s %8s %8s %10s\n", "stage", "median us",
              "moved GB/s", "/copy", "/read", "fp32 GB/s");
  for (const Stage& s : stages) {
    const double rate = s.moved_bytes / s.seconds;
    std::printf("%-42s %10.1f %10.1f %8.2f %8.2f %10.1f\n", s.name.c_str(),
                s.seconds * 1e6, rate / 1e9, rate / copy_rate, rate / read_rate,
                s.fp32_bytes / s.seconds / 1e9);
  }
  PrintTargets(stages, copy_rate, read_rate);
}

int Run() {
  const Settings settings = ReadSettings();
  if (CudaDeviceCount() == 0) {
    std::fprintf(stderr, "cuda_bench: no CUDA device; nothing measured\n");
    return 1;
  }
  std::unique_ptr<TernGradCuda> cuda = ValueOrDie(TernGradCuda::Create());
  cudaDeviceProp properties;
  BENCH_CHECK_OK(
      CudaStatus(cudaGetDeviceProperties(&properties, cuda->device()),
                 "cudaGetDeviceProperties"));
  PrintHeader(properties, settings);

  Workload work = MakeWorkload(settings);
  CheckAgainstCpu(*cuda, work);

  // ---- Timing.
  StageTimer timer(cuda->stream(), settings);
  TimeReferences(*cuda, properties, work, timer);
  TimeStatisticsKernel(*cuda, work, timer);
  TimeQuantizePackKernels(*cuda, work, timer);
  TimeWorkerCalls(*cuda, work, timer);
  TimeOneBit(work, timer);
  TimeServerAndPull(*cuda, work, timer);
  PrintReport(timer.stages());
  return 0;
}

}  // namespace

int RunCudaBench(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}

}  // namespace tern::kernels

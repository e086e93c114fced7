// The CPU codec benchmark (BENCHMARKS.md): throughput of every codec stage
// in bytes of fp32 input per second, and its ratio to memcpy and to a
// read-only sum of the same buffer measured in the same run. Run by
// `tern bench kernels` and by //kernels:codec_bench.
#ifndef TERN_KERNELS_CODEC_BENCH_H_
#define TERN_KERNELS_CODEC_BENCH_H_

namespace tern::kernels {

// Runs the benchmarks with Google Benchmark's flags in argv (argv[0] is the
// program name) and prints the ratio table. Returns the exit code.
int RunCodecBench(int argc, char** argv);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_CODEC_BENCH_H_

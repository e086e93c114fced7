// `tern bench kernels --device=cpu|cuda`: the CPU codec benchmark
// (codec_bench.h) or, in a build with --config=cuda, the GPU one
// (cuda_bench_main.h). Both report each stage in GB/s and as a fraction of
// references timed in the same run (BENCHMARKS.md).
#ifndef TERN_KERNELS_KERNEL_BENCH_H_
#define TERN_KERNELS_KERNEL_BENCH_H_

#include "absl/strings/string_view.h"

namespace tern::kernels {

// True when this binary was built with the CUDA kernels.
bool HasCudaBench();

// Runs the benchmark of `device` ("cpu" or "cuda") with the extra
// arguments in argv (argv[0] is the program name). Returns the exit code:
// 1, after saying why on stderr, for an unknown device or for "cuda" in a
// build without CUDA.
int RunKernelBench(absl::string_view device, int argc, char** argv);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_KERNEL_BENCH_H_

// The CUDA benchmark's entry point (cuda_bench.cc), shared by the
// //kernels:cuda_bench binary and `tern bench kernels --device=cuda`.
#ifndef TERN_KERNELS_CUDA_BENCH_MAIN_H_
#define TERN_KERNELS_CUDA_BENCH_MAIN_H_

namespace tern::kernels {

// Parses the benchmark's flags (--elements, --workers, --runs, ...) from
// argv (argv[0] is the program name), runs it and returns the exit code.
int RunCudaBench(int argc, char** argv);

}  // namespace tern::kernels

#endif  // TERN_KERNELS_CUDA_BENCH_MAIN_H_

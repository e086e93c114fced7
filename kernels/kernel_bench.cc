#include "kernels/kernel_bench.h"

#include <cstdio>
#include <string>

#include "kernels/codec_bench.h"
#if TERN_WITH_CUDA
#include "kernels/cuda_bench_main.h"
#endif

namespace tern::kernels {

bool HasCudaBench() { return TERN_WITH_CUDA != 0; }

int RunKernelBench(absl::string_view device, int argc, char** argv) {
  if (device == "cpu") return RunCodecBench(argc, argv);
  if (device == "cuda") {
#if TERN_WITH_CUDA
    return RunCudaBench(argc, argv);
#else
    std::fprintf(stderr,
                 "tern bench kernels: --device=cuda needs a tern built with "
                 "the CUDA kernels: bazel build -c opt --config=cuda //tern\n");
    return 1;
#endif
  }
  std::fprintf(stderr,
               "tern bench kernels: --device '%s' is not cpu or cuda\n",
               std::string(device).c_str());
  return 1;
}

}  // namespace tern::kernels

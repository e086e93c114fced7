#include "common/process/allocator.h"
#include "kernels/codec_bench.h"

int main(int argc, char** argv) {
  // The allocator policy of `tern` (and so of `tern bench kernels`), so
  // that this binary measures what the roles run.
  tern::process::KeepFreedMemory();
  return tern::kernels::RunCodecBench(argc, argv);
}

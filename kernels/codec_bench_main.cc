#include "kernels/codec_bench.h"

int main(int argc, char** argv) {
  return tern::kernels::RunCodecBench(argc, argv);
}

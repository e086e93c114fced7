#include "kernels/cuda_bench_main.h"

int main(int argc, char** argv) {
  return tern::kernels::RunCudaBench(argc, argv);
}

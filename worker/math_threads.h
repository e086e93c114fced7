// How many threads a worker's tensor arithmetic may use: --threads.
//
// libtorch's intra-op pool is one of two. Debian's libtorch does its
// matrix products in OpenBLAS (libopenblas0-pthread), which keeps a pool
// of its own, one thread per core, whatever libtorch was told, and whose
// idle threads spin in sched_yield. With several workers on one machine
// (tern launch, bench/net.sh) those pools fight the workers for the cores.
#ifndef TERN_WORKER_MATH_THREADS_H_
#define TERN_WORKER_MATH_THREADS_H_

#include <cstdint>

namespace tern::worker {

// Sets libtorch's intra-op threads and, when the process's BLAS is
// OpenBLAS, OpenBLAS's threads, to `threads`. Per process.
void SetMathThreads(uint32_t threads);

// OpenBLAS's thread count, or -1 when the process's BLAS is not OpenBLAS
// (another libblas.so.3 alternative: the reference BLAS has no threads).
int OpenBlasThreads();

}  // namespace tern::worker

#endif  // TERN_WORKER_MATH_THREADS_H_

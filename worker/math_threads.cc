#include "worker/math_threads.h"

#include <dlfcn.h>

#include "ATen/Parallel.h"

namespace tern::worker {
namespace {

// Looked up at run time: which BLAS libblas.so.3 is, is the machine's
// choice (update-alternatives), not the build's.
template <typename Fn>
Fn OpenBlasFunction(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

void SetMathThreads(uint32_t threads) {
  at::set_num_threads(static_cast<int>(threads));
  using SetFn = void (*)(int);
  if (const auto set = OpenBlasFunction<SetFn>("openblas_set_num_threads")) {
    set(static_cast<int>(threads));
  }
}

int OpenBlasThreads() {
  using GetFn = int (*)();
  const auto get = OpenBlasFunction<GetFn>("openblas_get_num_threads");
  return get != nullptr ? get() : -1;
}

}  // namespace tern::worker

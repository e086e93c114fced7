#include "worker/math_threads.h"

#include "ATen/Parallel.h"
#include "gtest/gtest.h"
#include "torch/types.h"

namespace tern::worker {
namespace {

TEST(MathThreadsTest, BothPoolsGetTheFlagsCount) {
  // A matrix product first, so that OpenBLAS has started its pool.
  torch::mm(torch::ones({64, 64}), torch::ones({64, 64}));
  for (const uint32_t threads : {1u, 2u, 1u}) {
    SetMathThreads(threads);
    EXPECT_EQ(at::get_num_threads(), static_cast<int>(threads));
    if (OpenBlasThreads() < 0) continue;  // this libblas is not OpenBLAS
    EXPECT_EQ(OpenBlasThreads(), static_cast<int>(threads));
  }
}

}  // namespace
}  // namespace tern::worker

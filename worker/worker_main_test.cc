#include "worker/worker_main.h"

#include "common/process/exit_codes.h"
#include "gtest/gtest.h"

namespace tern::worker {
namespace {

WorkerOptions Options() {
  WorkerOptions options;
  options.dataset = "synthetic";
  options.model = "lenet";
  options.ps = {"127.0.0.1:1"};  // nobody listens on port 1
  options.join_timeout_s = 1;
  options.rpc_timeout_s = 0.3;
  options.steps = 1;
  return options;
}

TEST(RunWorkerTest, BadOptionsArePermanent) {
  WorkerOptions options = Options();
  options.worker_id = 3;  // not below num_workers = 1
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), process::kExitPermanent);
  options = Options();
  options.log_level = "loud";
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), process::kExitPermanent);
  options = Options();
  options.model = "resnet";
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), process::kExitPermanent);
}

TEST(RunWorkerTest, AMissingDataSetIsPermanent) {
  WorkerOptions options = Options();
  options.dataset = "mnist";
  options.data_dir = "/nonexistent/mnist";
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), process::kExitPermanent);
}

TEST(RunWorkerTest, UnreachableShardsAreTransient) {
  EXPECT_EQ(RunWorker(Options(), MakeNullLogger()), process::kExitTransient);
}

}  // namespace
}  // namespace tern::worker

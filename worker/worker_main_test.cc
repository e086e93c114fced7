#include "worker/worker_main.h"

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

TEST(ExitCodeForTest, FollowsTheRestartPolicy) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("bad flag")), 1);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("no data")), 1);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("diverged")), 1);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("odd shard")), 1);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("shard down")), 128);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("slow shard")), 128);
  EXPECT_EQ(ExitCodeFor(absl::AbortedError("aborted")), 128);
  EXPECT_EQ(ExitCodeFor(absl::CancelledError("cancelled")), 128);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("busy")), 128);
}

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
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), 1);
  options = Options();
  options.log_level = "loud";
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), 1);
  options = Options();
  options.model = "resnet";
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), 1);
}

TEST(RunWorkerTest, AMissingDataSetIsPermanent) {
  WorkerOptions options = Options();
  options.dataset = "mnist";
  options.data_dir = "/nonexistent/mnist";
  EXPECT_EQ(RunWorker(options, MakeNullLogger()), 1);
}

TEST(RunWorkerTest, UnreachableShardsAreTransient) {
  EXPECT_EQ(RunWorker(Options(), MakeNullLogger()), 128);
}

}  // namespace
}  // namespace tern::worker

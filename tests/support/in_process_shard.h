// Test support: the real parameter-server shard of server/ (Aggregator
// behind PsService) on a loopback port inside the test process, with the
// ticker that expires its barriers, so that tests/trainer_test.cc and
// tests/trainer_resume_test.cc can run worker/'s Trainers in threads
// against it. Test-only, and in tests/ because it spans two roles (DESIGN
// section 1): worker/ does not depend on server/, only these tests do. It
// keeps the namespace of the tests it serves.
#ifndef TERN_TESTS_SUPPORT_IN_PROCESS_SHARD_H_
#define TERN_TESTS_SUPPORT_IN_PROCESS_SHARD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/net/server.h"
#include "gtest/gtest.h"
#include "server/aggregator.h"
#include "server/ps_service.h"

namespace tern::worker {

// gRPC stays initialized for the whole test binary: otherwise every test
// creates and destroys all gRPC objects, and gRPC 1.51's shutdown and
// re-initialization race with the threads of its callback API (seen as
// "assertion failed: prior > 0" in grpc_cq_internal_unref). Register it
// once per binary with ::testing::AddGlobalTestEnvironment.
class GrpcEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;
};

class InProcessShard {
 public:
  // `catch_up_bytes`: the shard's --catch_up_mb in bytes (the default's
  // when absent).
  InProcessShard(uint32_t shard, uint32_t num_shards, uint32_t num_workers,
                 absl::Duration barrier_timeout,
                 std::optional<uint64_t> catch_up_bytes = std::nullopt);
  // Closes the aggregator (pending calls get UNAVAILABLE) and the server.
  ~InProcessShard();

  int port() const { return port_; }
  server::Aggregator& aggregator() { return *aggregator_; }

 private:
  std::unique_ptr<server::Aggregator> aggregator_;
  std::unique_ptr<server::PsService> service_;
  std::unique_ptr<net::Server> server_;
  int port_ = 0;
  absl::Notification stop_;
  std::thread ticker_;
};

}  // namespace tern::worker

#endif  // TERN_TESTS_SUPPORT_IN_PROCESS_SHARD_H_

// grpc.health.v1.Health (proto/grpc/health/v1/health.proto) with a serving
// status per service: what Kubernetes probes and `tern health` ask. Ours
// rather than gRPC's default health service because that one is switched
// on by a process-wide flag (grpc::EnableDefaultHealthCheckService) and
// these servers keep no process-wide state. Check is what probes ask;
// Watch streams a service's status as it changes.
//
// Thread safety: every method may be called from any thread.
#ifndef TERN_COMMON_NET_HEALTH_SERVICE_H_
#define TERN_COMMON_NET_HEALTH_SERVICE_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace tern::net {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // Registers `service` ("" is the server as a whole) or changes its
  // status. Ignored after Shutdown.
  void SetServing(absl::string_view service, bool serving);
  // Every service NOT_SERVING from now on, for good (a server going down).
  void Shutdown();

  // SERVING or NOT_SERVING; NOT_FOUND for a service never registered.
  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;

  // Writes the service's status (SERVICE_UNKNOWN while it is not
  // registered), then each change, until the client cancels or its
  // deadline passes (CANCELLED), or Shutdown: then NOT_SERVING is the last
  // message and the stream ends OK, so a server's shutdown never waits on
  // a watcher.
  grpc::Status Watch(
      grpc::ServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer)
      override;

 private:
  grpc::health::v1::HealthCheckResponse::ServingStatus StatusOf(
      const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, bool, std::less<>> serving_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tern::net

#endif  // TERN_COMMON_NET_HEALTH_SERVICE_H_

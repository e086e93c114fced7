#include "common/net/health_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace tern::net {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

namespace {

// How often a watcher, between changes, looks whether its client has gone.
constexpr absl::Duration kWatchPoll = absl::Milliseconds(200);

}  // namespace

void HealthService::SetServing(absl::string_view service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  serving_[std::string(service)] = serving;
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (auto& [service, serving] : serving_) serving = false;
}

grpc::Status HealthService::Check(grpc::ServerContext* /*context*/,
                                  const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  absl::MutexLock lock(&mu_);
  const auto it = serving_.find(request->service());
  if (it == serving_.end()) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("no service '", request->service(), "' on this server"));
  }
  response->set_status(it->second ? HealthCheckResponse::SERVING
                                  : HealthCheckResponse::NOT_SERVING);
  return grpc::Status::OK;
}

}  // namespace tern::net

namespace tern::net {

HealthCheckResponse::ServingStatus HealthService::StatusOf(
    const std::string& service) const {
  const auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? HealthCheckResponse::SERVING
                    : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Watch(
    grpc::ServerContext* context, const HealthCheckRequest* request,
    grpc::ServerWriter<HealthCheckResponse>* writer) {
  const std::string& service = request->service();
  bool first = true;
  HealthCheckResponse::ServingStatus sent = HealthCheckResponse::UNKNOWN;
  while (!context->IsCancelled()) {
    HealthCheckResponse response;
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      const auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shut_down_ || StatusOf(service) != sent;
      };
      if (!first && !mu_.AwaitWithTimeout(absl::Condition(&changed),
                                          kWatchPoll)) {
        continue;  // nothing changed: look at the client again
      }
      response.set_status(StatusOf(service));
      last = shut_down_;
    }
    if (first || response.status() != sent) {
      if (!writer->Write(response)) break;  // the client has gone
      sent = response.status();
      first = false;
    }
    if (last) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      "the health watcher went away");
}

}  // namespace tern::net

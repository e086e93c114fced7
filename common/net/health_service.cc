#include "common/net/health_service.h"

#include "absl/strings/str_cat.h"

namespace tern::net {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

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

#include "server/worker_admission.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "server/wire.h"

namespace tern::server {

WorkerAdmission::WorkerAdmission(Logger logger, net::PeerPolicy peers,
                                 uint64_t first_worker)
    : refusals_(std::move(logger)),
      peers_(std::move(peers)),
      first_worker_(first_worker) {}

bool WorkerAdmission::Admit(grpc::CallbackServerContext* context,
                            grpc::ServerUnaryReactor* reactor,
                            const char* method, uint32_t worker) const {
  const uint64_t identity = first_worker_ + worker;
  // No certificate names an id beyond 32 bits: such a caller is no worker.
  const absl::Status status =
      identity > std::numeric_limits<uint32_t>::max()
          ? absl::PermissionDeniedError(absl::StrCat(
                "worker ", worker, " of this data center has no identity"))
          : net::CheckCaller(*context, peers_, net::PeerRole::kWorker,
                             static_cast<uint32_t>(identity));
  if (status.ok()) return true;
  refusals_.WarnCall(context->peer(), method, status,
                     "{} as worker {} refused: {}", method, worker,
                     std::string(status.message()));
  reactor->Finish(ToGrpcStatus(status));
  return false;
}

std::optional<JoinRequest> WorkerAdmission::ReadJoin(
    grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
    const tern::v1::JoinRequest& wire) const {
  absl::StatusOr<JoinRequest> join = JoinFromWire(wire);
  if (join.ok()) return *std::move(join);
  refusals_.WarnCall(context->peer(), "Join", join.status(),
                     "join of worker {} refused: {}", wire.worker_id(),
                     std::string(join.status().message()));
  reactor->Finish(ToGrpcStatus(join.status()));
  return std::nullopt;
}

}  // namespace tern::server

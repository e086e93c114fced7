// The gRPC face of a parameter-server shard: tern.v1.ParameterServer over
// the callback API, a thin adapter that turns protos into the plain types of
// server/messages.h, calls the Aggregator and finishes each call when the
// aggregator answers (for a barrier, later, from the thread that completes
// it). Errors travel as the aggregator's absl::Status, code and message
// intact (common/grpc_status.h).
//
// Ownership: the service borrows the aggregator, which must outlive the
// gRPC server the service is registered with, and must be closed
// (Aggregator::Close) before that server shuts down, so that no call waits
// on a barrier while the server drains.
#ifndef TERN_SERVER_PS_SERVICE_H_
#define TERN_SERVER_PS_SERVICE_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "common/logging.h"
#include "common/net/peer_identity.h"
#include "server/aggregator.h"
#include "server/push_pull_call.h"
#include "server/shard_metrics.h"
#include "server/worker_admission.h"
#include "tern/v1/parameter_server.grpc.pb.h"

namespace tern::server {

// PushPull is served raw (server/push_pull_call.h), the rest typed.
class PsService final
    : public tern::v1::ParameterServer::WithRawCallbackMethod_PushPull<
          tern::v1::ParameterServer::CallbackService> {
 public:
  // `peers`: who may call (PeerPolicy::For the server's TLS and --run_id);
  // under mTLS every method's caller must be worker <worker_id field>,
  // else PERMISSION_DENIED (UNAUTHENTICATED without an identity) before
  // anything reaches the aggregator. The default checks nothing
  // (plaintext).
  // `metrics` counts the pushes and bytes (borrowed, must outlive the
  // service); null: counted in a registry of the service's own.
  PsService(Aggregator* aggregator, Logger logger, net::PeerPolicy peers = {},
            ShardMetrics* metrics = nullptr);

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const tern::v1::JoinRequest* request,
                                 tern::v1::JoinResponse* response) override;
  grpc::ServerUnaryReactor* ShareScalers(
      grpc::CallbackServerContext* context,
      const tern::v1::ShareScalersRequest* request,
      tern::v1::ShareScalersResponse* response) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  // Where PushPull's request and response buffers live (gRPC's
  // MessageAllocator, which gRPC generates a setter for only for typed
  // methods). Before the server starts; the allocator must outlive it.
  // The tests use it to see what a call waiting at the barrier holds.
  void SetPushPullAllocator(
      grpc::MessageAllocator<grpc::ByteBuffer, grpc::ByteBuffer>* allocator);
  grpc::ServerUnaryReactor* CheckParams(
      grpc::CallbackServerContext* context,
      const tern::v1::CheckParamsRequest* request,
      tern::v1::CheckParamsResponse* response) override;
  // Read-only: what the open step waits for (Aggregator::WaitingFor).
  grpc::ServerUnaryReactor* Waiting(
      grpc::CallbackServerContext* context,
      const tern::v1::WaitingRequest* request,
      tern::v1::WaitingResponse* response) override;

 private:
  Aggregator* const aggregator_;
  const WorkerAdmission admission_;
  // Without borrowed metrics, the service counts into its own.
  prometheus::Registry own_registry_;
  std::unique_ptr<ShardMetrics> own_metrics_;
  ShardMetrics* const metrics_;
  PushPullCall push_pull_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_PS_SERVICE_H_

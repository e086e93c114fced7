// The gRPC face of a WeightGrad local parameter server: tern.v1.
// ParameterServer over the callback API, a thin adapter over LocalPs
// (server/local_ps.h), like server/ps_service.h over the TernGrad
// aggregator. ShareScalers has no place in this mode (workers ternarize with
// their own scalers) and is FAILED_PRECONDITION; CheckParams is accepted and
// compares nothing: replicas inside a data center legitimately differ (each
// gets its own stochastic weights), and the LPS's own checksum is what the
// run checks (server/WEIGHTGRAD.md).
//
// Ownership: borrows the LocalPs, which must outlive the gRPC server and be
// closed (LocalPs::Close) before that server shuts down.
#ifndef TERN_SERVER_LPS_SERVICE_H_
#define TERN_SERVER_LPS_SERVICE_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "common/logging.h"
#include "common/net/peer_identity.h"
#include "server/local_ps.h"
#include "server/push_pull_call.h"
#include "server/shard_metrics.h"
#include "server/worker_admission.h"
#include "tern/v1/parameter_server.grpc.pb.h"

namespace tern::server {

// PushPull is served raw (server/push_pull_call.h), the rest typed.
class LpsService final
    : public tern::v1::ParameterServer::WithRawCallbackMethod_PushPull<
          tern::v1::ParameterServer::CallbackService> {
 public:
  // `peers`: who may call (PeerPolicy::For the server's TLS and --run_id);
  // under mTLS every method's caller must be worker
  // <first_worker + worker_id field>, else PERMISSION_DENIED
  // (UNAUTHENTICATED without an identity) before anything reaches the
  // LocalPs. A worker's identity is its index in the whole run, so that a
  // worker of one data center cannot act as one of another's:
  // first_worker = datacenter * num_workers (tern launch --geo numbers its
  // workers so, and `tern certs` issues worker-<g> for each). The default
  // checks nothing (plaintext).
  // `metrics` counts the pushes and bytes (borrowed, must outlive the
  // service); null: counted in a registry of the service's own.
  LpsService(LocalPs* lps, Logger logger, net::PeerPolicy peers = {},
             uint64_t first_worker = 0, ShardMetrics* metrics = nullptr);

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
  grpc::ServerUnaryReactor* CheckParams(
      grpc::CallbackServerContext* context,
      const tern::v1::CheckParamsRequest* request,
      tern::v1::CheckParamsResponse* response) override;

 private:
  LocalPs* const lps_;
  const WorkerAdmission admission_;
  // Without borrowed metrics, the service counts into its own.
  prometheus::Registry own_registry_;
  std::unique_ptr<ShardMetrics> own_metrics_;
  ShardMetrics* const metrics_;
  PushPullCall push_pull_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_LPS_SERVICE_H_

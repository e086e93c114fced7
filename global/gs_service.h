// The gRPC face of the global server: tern.v1.GlobalServer over the
// callback API, a thin adapter that turns protos into the plain types of
// global/messages.h, calls the RoundAggregator and finishes each call when
// it answers (for SyncRound usually later, from the thread that closes the
// round). Errors travel as the aggregator's absl::Status, code and message
// intact (common/grpc_status.h). A request the plain types cannot hold (a
// codec or layout number no kernel knows) is INVALID_ARGUMENT naming the
// data center, round and chunk.
//
// Ownership: the service borrows the aggregator, which must outlive the
// gRPC server the service is registered with, and must be closed
// (RoundAggregator::Close) before that server shuts down, so that no call
// waits on a round while the server drains.
#ifndef TERN_GLOBAL_GS_SERVICE_H_
#define TERN_GLOBAL_GS_SERVICE_H_

#include <cstdint>
#include <utility>

#include "common/logging.h"
#include "common/net/peer_identity.h"
#include "common/refusal_log.h"
#include "global/round_aggregator.h"
#include "tern/v1/global_server.grpc.pb.h"

namespace tern::global {

class GsService final : public tern::v1::GlobalServer::CallbackService {
 public:
  // `peers`: who may call (PeerPolicy::For the server's TLS and --run_id);
  // under mTLS the caller of Register and SyncRound must be lps
  // <datacenter field>, else PERMISSION_DENIED (UNAUTHENTICATED without an
  // identity) before anything reaches the aggregator. The default checks
  // nothing (plaintext).
  GsService(RoundAggregator* aggregator, Logger logger,
            net::PeerPolicy peers = {});

  grpc::ServerUnaryReactor* Register(
      grpc::CallbackServerContext* context,
      const tern::v1::RegisterRequest* request,
      tern::v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* SyncRound(
      grpc::CallbackServerContext* context,
      const tern::v1::SyncRoundRequest* request,
      tern::v1::SyncRoundResponse* response) override;

 private:
  // net::CheckCaller for the LPS of `datacenter`; when it refuses, logs
  // that and finishes the call with its status and returns false.
  bool Admit(grpc::CallbackServerContext* context,
             grpc::ServerUnaryReactor* reactor, const char* method,
             uint32_t datacenter) const;

  RoundAggregator* const aggregator_;
  const Logger logger_;
  // Thread-safe; counting refusals is no state of the service's.
  mutable RefusalLog refusals_;
  const net::PeerPolicy peers_;
};

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_SERVICE_H_

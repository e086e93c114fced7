// What the shard's and the LPS's services do first with a worker's call
// (server/ps_service.h, server/lps_service.h): admit the caller as the
// worker it says it is, and read a Join from the wire. A refusal is logged
// at a bounded rate (common/refusal_log.h) and finishes the call with its
// status.
#ifndef TERN_SERVER_WORKER_ADMISSION_H_
#define TERN_SERVER_WORKER_ADMISSION_H_

#include <cstdint>
#include <optional>

#include "common/logging.h"
#include "common/net/peer_identity.h"
#include "common/refusal_log.h"
#include "grpcpp/grpcpp.h"
#include "server/messages.h"
#include "tern/v1/parameter_server.pb.h"

namespace tern::server {

class WorkerAdmission {
 public:
  // Under mTLS worker w of this server must present the identity of
  // worker first_worker + w: a shard's workers are the run's (0); an LPS's
  // are its data center's (datacenter * workers per data center).
  WorkerAdmission(Logger logger, net::PeerPolicy peers,
                  uint64_t first_worker = 0);

  // net::CheckCaller for worker `worker`; when it refuses, logs that,
  // finishes the call with its status and returns false.
  bool Admit(grpc::CallbackServerContext* context,
             grpc::ServerUnaryReactor* reactor, const char* method,
             uint32_t worker) const;

  // The Join of `wire` (JoinFromWire); when it will not do, logs that,
  // finishes the call with its status and returns nothing.
  std::optional<JoinRequest> ReadJoin(grpc::CallbackServerContext* context,
                                      grpc::ServerUnaryReactor* reactor,
                                      const tern::v1::JoinRequest& wire) const;

  // Where the service's other refusals are logged (thread-safe).
  RefusalLog* refusals() const { return &refusals_; }

 private:
  mutable RefusalLog refusals_;
  const net::PeerPolicy peers_;
  const uint64_t first_worker_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_WORKER_ADMISSION_H_

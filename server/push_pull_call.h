// The PushPull method of a shard (PsService) and of an LPS (LpsService),
// served raw, gRPC's ByteBuffer in and out, so that a step's answer is
// serialized once. Every worker's answer to a shard's step is the same
// PushReply (one shared_ptr); the first call to finish writes it as the
// bytes of a tern.v1.PushPullResponse (server/push_reply_bytes.h): the
// framing into one grpc::Slice, while each large chunk's data stays where
// the reply holds it, in a slice that keeps the reply alive. Every call's
// response refers to those slices (slices count their references). Before,
// each answer copied the reply into a message and gRPC serialized each
// message again; then one copy of the reply was written for all (issue 20,
// item 3). An LPS, whose answers differ by worker, writes each one once.
//
// A push that is taken sends the response's initial metadata at once,
// before the step's answer: the worker's sign that this shard has it
// (worker/ps_client.h, PushOrder).
//
// The request is parsed here as gRPC's own handler parses it, the parse
// taking the received bytes, so that a push held at the barrier holds
// neither those nor its payload (TakePushFromWire; issue 14).
#ifndef TERN_SERVER_PUSH_PULL_CALL_H_
#define TERN_SERVER_PUSH_PULL_CALL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/refusal_log.h"
#include "core/deferred.h"
#include "grpcpp/grpcpp.h"
#include "server/messages.h"
#include "server/shard_metrics.h"

namespace tern::server {

class PushPullCall {
 public:
  // Whether the caller may call `method` as worker `worker`; when not, it
  // has logged that and finished the call (the services' Admit).
  using Admit = std::function<bool(grpc::CallbackServerContext* context,
                                   grpc::ServerUnaryReactor* reactor,
                                   const char* method, uint32_t worker)>;
  // The Aggregator's or the LocalPs's PushPull.
  using Handle = std::function<void(const PushRequest& request,
                                    core::Callback<PushAnswer> done)>;

  // The Handle of `target`'s PushPull (borrowed).
  template <typename Target>
  static Handle HandleOf(Target* target) {
    return
        [target](const PushRequest& request, core::Callback<PushAnswer> done) {
          target->PushPull(request, std::move(done));
        };
  }

  // `refusals` and `metrics` are borrowed and must outlive this; so must
  // this every call it serves (the services own it).
  PushPullCall(Admit admit, Handle handle, RefusalLog* refusals,
               ShardMetrics* metrics);

  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response);

 private:
  // The bytes of `answer`, written by the first call that needs them.
  std::vector<grpc::Slice> SlicesOf(const PushAnswer& answer);

  const Admit admit_;
  const Handle handle_;
  RefusalLog* const refusals_;
  ShardMetrics* const metrics_;

  absl::Mutex mu_;
  // The last answer written and its bytes. A weak_ptr, so that the reply
  // is freed with its step and a later reply at its address never matches.
  std::weak_ptr<const PushReply> written_for_ ABSL_GUARDED_BY(mu_);
  std::vector<grpc::Slice> written_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tern::server

#endif  // TERN_SERVER_PUSH_PULL_CALL_H_

// The worker's side of the parameter-server protocol (DESIGN sections 3 and
// 7): one gRPC channel per shard; Join with retries while shards start up;
// ShareScalers, PushPull and CheckParams fanned out to the shards in
// parallel, every call with a deadline.
//
// Errors come back as absl::Status (common/grpc_status.h), each prefixed
// with the shard's index and address and the method, e.g.
// "shard 1 (10.0.0.2:50051): PushPull: chunk 7: ...". A shard that does not
// answer within the deadline gives DEADLINE_EXCEEDED; an unreachable one
// UNAVAILABLE (the transient failures a restart can fix).
//
// Thread safety: all methods may be called from several threads; calls are
// independent. The client owns its channels and stubs. Each fan-out polls a
// completion queue of its own from the calling thread, so a call's context
// and response never outlive the method that started it (and no gRPC
// callback thread is involved).
#ifndef TERN_WORKER_PS_CLIENT_H_
#define TERN_WORKER_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/net/backoff.h"
#include "common/net/credentials.h"
#include "common/partitioner.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "tern/v1/parameter_server.grpc.pb.h"

namespace tern::worker {

// kTogether: every request at once. kInTurn: one after another in request
// order, each once the previous shard has it (the shard's initial
// metadata; a shard that sends none before its answer makes this one call
// at a time), so that answers come down while later pushes go up.
// kLocalLast: the requests to shards on other hosts at once, those to this
// host's shards (PsClientOptions::on_this_host) once every other shard has
// its request, so that this host's shards cannot answer (up this host's
// link) while this worker's pushes still go up it; all at once when every
// shard, or none, is on this host.
enum class PushOrder { kTogether, kInTurn, kLocalLast };

// The PushOrder a --push_order value names (a checked flag: together,
// in_turn or local_last; anything else is kTogether).
PushOrder ParsePushOrder(const std::string& name);

struct PsClientOptions {
  // Deadline of every RPC (--rpc_timeout_s).
  absl::Duration rpc_timeout = absl::Seconds(60);
  // How long Join keeps retrying shards that are not up yet
  // (--join_timeout_s).
  absl::Duration join_timeout = absl::Seconds(300);
  // How long a step's calls (ShareScalers, PushPull, CheckParams) keep
  // retrying a shard that went away, from the first failure
  // (--server_loss_timeout_s): a shard restarted from its --state_dir
  // answers the retried calls as the lost one would have.
  absl::Duration server_loss_timeout = absl::Seconds(120);
  // A call still unanswered this long is logged once with its shards
  // (--straggler_warn_s): a late worker holds the step; zero: never.
  absl::Duration straggler_warn = absl::Seconds(10);
  // How PushPull sends its requests (--push_order).
  PushOrder push_order = PushOrder::kTogether;
  // For kLocalLast: whether a shard's address is on this worker's host.
  // Unset, Connect asks net::IsOnThisHost with this machine's interface
  // addresses (a name other than localhost is another host); tests set it.
  std::function<bool(const std::string& address)> on_this_host;
  // The largest message sent or received; see MessageBytesBound.
  int max_message_bytes = 4 << 20;
  // Plaintext or TLS (the worker's --tls_* files); Connect checks the
  // files.
  net::TransportSecurity security;
};

// A bound on the size of any message between this model's worker and a
// shard: the shard's elements in fp32 (the widest encoding a chunk may
// travel in), 128 bytes of framing per chunk (key, codec, layout, version,
// counts, a few scalers, length prefixes) and 1 MiB of slack.
// INVALID_ARGUMENT when that exceeds what gRPC can carry (2 GiB): then the
// model needs more shards.
absl::StatusOr<int> MessageBytesBound(const Partition& partition);

// One request for one shard.
template <typename Request>
struct ShardRequest {
  uint32_t shard = 0;
  Request request;
};

class PsClient {
 public:
  using Stub = tern::v1::ParameterServer::Stub;

  // Channels to `addresses` (host:port, shard-index order) with the
  // security and message-size limits of `options`. Connecting is lazy: an
  // address nobody listens on yet is not an error here (Join waits for
  // it). INVALID_ARGUMENT when `addresses` is empty; the error of
  // net::CheckSecurity when a TLS file will not do.
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(
      const std::vector<std::string>& addresses, const PsClientOptions& options,
      Logger logger);

  // Over existing channels (tests, in-process servers); `names` label the
  // shards in errors. Both vectors have one entry per shard. Make them with
  // net::CreateChannel (common/net/channel.h): its retry policy is what
  // retries an UNAVAILABLE answer.
  PsClient(std::vector<std::string> names,
           std::vector<std::shared_ptr<grpc::Channel>> channels,
           const PsClientOptions& options, Logger logger);

  uint32_t num_shards() const { return static_cast<uint32_t>(stubs_.size()); }
  const std::string& name(uint32_t shard) const { return names_[shard]; }

  // Joins every shard with `request` (shard_index set per shard). A shard
  // that is unreachable or does not answer is retried with exponential
  // backoff until join_timeout; any other error ends the join at once.
  // Responses are in shard order.
  absl::StatusOr<std::vector<tern::v1::JoinResponse>> Join(
      const tern::v1::JoinRequest& request);
  // The same with a request of its own for each shard (in shard order).
  absl::StatusOr<std::vector<tern::v1::JoinResponse>> Join(
      std::vector<tern::v1::JoinRequest> requests);

  // Sends each request to its shard, all in parallel (PushPull: in
  // push_order), and waits for every answer. Responses are in request
  // order. An UNAVAILABLE answer is retried within the deadline by the
  // channel's retry policy (pushes are idempotent, DESIGN section 7); a push
  // the shard has already acknowledged (its initial metadata came) is past
  // that policy and is retried as a lost shard's, for server_loss_timeout.
  absl::StatusOr<std::vector<tern::v1::ShareScalersResponse>> ShareScalers(
      std::vector<ShardRequest<tern::v1::ShareScalersRequest>> requests);
  absl::StatusOr<std::vector<tern::v1::PushPullResponse>> PushPull(
      std::vector<ShardRequest<tern::v1::PushPullRequest>> requests);

  // Sends the same checksum to every shard. FAILED_PRECONDITION from a
  // shard means the replicas diverged.
  absl::Status CheckParams(const tern::v1::CheckParamsRequest& request);

 private:
  // A push as the bytes PushPull sends (worker/push_request_bytes.h).
  struct SerializedPush {
    uint32_t worker = 0;
    grpc::ByteBuffer bytes;
    uint32_t worker_id() const { return worker; }
  };
  // PushPull's calls: the request as those bytes, the answer parsed as
  // the message (protoc's generated client would serialize the request
  // itself, copying every byte of its data).
  using PushStub = grpc::TemplatedGenericStub<grpc::ByteBuffer,
                                              tern::v1::PushPullResponse>;

  // Starts every request with `start` (shard, context, request, queue) ->
  // reader, all in parallel (or in the `order` push_order says), each with
  // the deadline rpc_timeout (UNAVAILABLE is retried within it by the
  // channel). With a `join_budget`, the shards whose answer is UNAVAILABLE
  // or DEADLINE_EXCEEDED are tried again, by hand, until the budget is
  // spent: a shard that is still starting may take many deadlines
  // (common/net/backoff.h); each attempt's deadline is then
  // min(rpc_timeout, what is left of the budget). Without one (a
  // step's calls), only a ShardLost failure is tried again, for
  // server_loss_timeout from the first such failure, which is logged.
  template <typename Request, typename Response, typename Start>
  absl::StatusOr<std::vector<Response>> FanOut(
      const char* method, std::vector<ShardRequest<Request>> requests,
      std::optional<absl::Duration> join_budget, PushOrder order, Start start);

  // Between two attempts: waits the backoff's next pause, logging
  // `last_error`; or, once `budget` is spent, returns `last_error` saying
  // how many attempts were made and naming `budget_flag`.
  absl::Status PauseBeforeRetry(absl::Duration budget, const char* budget_flag,
                                const absl::Status& last_error,
                                net::Backoff* backoff);

  // A call of `method` by worker `worker_id` has had no answer from
  // `shards` for straggler_warn: logs, for each, what its open step waits
  // for, as the shard says (tern.v1 Waiting, asked with a short deadline),
  // so that every worker's log names the straggler; a shard that cannot
  // say (an LPS, an older shard, no answer) is named alone
  // (ps_client_stragglers.cc).
  void WarnWaiting(const char* method, uint32_t worker_id,
                   const std::vector<uint32_t>& shards) const;

  // Fills on_this_host_ (options_.on_this_host, or this machine's
  // interface addresses) and logs which shards it found.
  void FindShardsOnThisHost();

  // Whether shard `shard` went away (killed, restarting): UNAVAILABLE, or
  // DEADLINE_EXCEEDED while its channel is not connected.
  bool ShardLost(uint32_t shard, const absl::Status& status) const;

  std::vector<std::string> names_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<Stub>> stubs_;
  std::vector<std::unique_ptr<PushStub>> push_stubs_;  // one per shard
  PsClientOptions options_;
  Logger logger_;
  // By shard: whether it is on this host (kLocalLast only; else empty).
  std::vector<bool> on_this_host_;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_PS_CLIENT_H_

#include "worker/ps_client.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/net/address.h"
#include "common/net/backoff.h"
#include "common/net/channel.h"
#include "grpcpp/completion_queue.h"
#include "worker/push_request_bytes.h"

namespace tern::worker {
namespace {

using tern::v1::CheckParamsRequest;
using tern::v1::CheckParamsResponse;
using tern::v1::JoinRequest;
using tern::v1::JoinResponse;
using tern::v1::PushPullRequest;
using tern::v1::PushPullResponse;
using tern::v1::ShareScalersRequest;
using tern::v1::ShareScalersResponse;

// How long past its deadline we wait for a call's completion before we
// cancel it ourselves: gRPC enforces the deadline, this only bounds the wait
// should the completion be late.
constexpr absl::Duration kCompletionGrace = absl::Seconds(5);
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(2);
// The method PushStub calls: ParameterServer's PushPull.
const char* const kPushPullMethod = "/tern.v1.ParameterServer/PushPull";

template <typename Response>
struct Call;

// A completion-queue tag: the end of a call, or (ask_receipt) the shard's
// initial metadata, which a shard sends once it has the request.
template <typename Response>
struct CallEvent {
  Call<Response>* call;
  bool received;
};

// One call of one attempt.
template <typename Response>
struct Call {
  size_t index = 0;  // position in the caller's request vector
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;
  Response response;
  grpc::Status status;
  bool started = false;
  // Whether this call's first event (its receipt, or its end) has been
  // handed to RunCalls, which may start more calls on it.
  bool released = false;
  bool done = false;
  CallEvent<Response> on_done{this, false};
  CallEvent<Response> on_received{this, true};
};

absl::Status ShardError(uint32_t shard, const std::string& name,
                        const char* method, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("shard ", shard, " (", name, "): ", method,
                                   ": ", status.message()));
}

// INVALID_ARGUMENT when a request names a shard the client does not have.
template <typename Request>
absl::Status CheckShards(const char* method,
                         const std::vector<ShardRequest<Request>>& requests,
                         size_t num_shards) {
  for (const auto& request : requests) {
    if (request.shard >= num_shards) {
      return absl::InvalidArgumentError(
          absl::StrCat(method, " for shard ", request.shard, " but there are ",
                       num_shards, " shards"));
    }
  }
  return absl::OkStatus();
}

// The calls of the requests at `todo` (positions in `requests`), not
// started yet.
template <typename Response>
std::vector<std::unique_ptr<Call<Response>>> MakeCalls(
    const std::vector<size_t>& todo) {
  std::vector<std::unique_ptr<Call<Response>>> calls;
  for (const size_t index : todo) {
    calls.push_back(std::make_unique<Call<Response>>());
    calls.back()->index = index;
  }
  return calls;
}

// Starts `call` to `shard` on `queue` with `deadline`; `ask_receipt` also
// asks for the shard's initial metadata, the sign that it has the request.
template <typename Response, typename Request, typename Start>
void StartCall(uint32_t shard, const Request& request, absl::Time deadline,
               bool ask_receipt, grpc::CompletionQueue* queue, Start& start,
               Call<Response>* call) {
  call->started = true;
  call->context.set_deadline(absl::ToChronoTime(deadline));
  // Wait for the channel to connect (a shard starting up, a connection
  // being re-established) instead of failing at once; the deadline bounds
  // the wait.
  call->context.set_wait_for_ready(true);
  call->reader = start(shard, &call->context, request, queue);
  if (ask_receipt) call->reader->ReadInitialMetadata(&call->on_received);
  call->reader->Finish(&call->response, &call->status, &call->on_done);
}

// Marks the call of a completion-queue event; whether it was its end.
template <typename Response>
bool Mark(void* tag) {
  auto* event = static_cast<CallEvent<Response>*>(tag);
  if (!event->received) event->call->done = true;
  return !event->received;
}

// Waits until every call completed or `wait_until`, then shuts `queue` down
// and drains it, so that no completion refers to a call any more. Each call
// that is received or ends is reported, once, to `on_received` (which may
// start more calls). Calls still open at `wait_until` are cancelled and
// answer DEADLINE_EXCEEDED. Calls still open at `warn_at` are handed to
// `warn` once.
template <typename Response>
void AwaitCalls(grpc::CompletionQueue* queue, absl::Time wait_until,
                absl::Time attempt_start, absl::Time warn_at,
                const std::function<void(const std::vector<size_t>&)>& warn,
                const std::function<void()>& on_received,
                std::vector<std::unique_ptr<Call<Response>>>* calls) {
  size_t pending = calls->size();
  bool warned = false;
  while (pending > 0) {
    void* tag = nullptr;
    bool ok = false;
    const absl::Time until =
        warned ? wait_until : std::min(warn_at, wait_until);
    const auto next = queue->AsyncNext(&tag, &ok, absl::ToChronoTime(until));
    if (next == grpc::CompletionQueue::TIMEOUT && !warned &&
        until < wait_until) {
      warned = true;
      std::vector<size_t> open;
      for (const auto& call : *calls) {
        if (!call->done) open.push_back(call->index);
      }
      warn(open);
      continue;
    }
    if (next != grpc::CompletionQueue::GOT_EVENT) break;
    if (Mark<Response>(tag)) --pending;
    Call<Response>* call = static_cast<CallEvent<Response>*>(tag)->call;
    if (!call->released) {
      call->released = true;
      on_received();
    }
  }
  const bool late = pending > 0;
  if (late) {
    // gRPC missed its own deadline; cancelling completes the calls at once.
    for (auto& call : *calls) {
      if (call->started && !call->done) call->context.TryCancel();
    }
  }
  queue->Shutdown();
  void* tag = nullptr;
  bool ok = false;
  // Takes the remaining (cancelled) completions and the shutdown event:
  // gRPC completes every started operation once it is cancelled.
  while (queue->Next(&tag, &ok)) Mark<Response>(tag);
  if (!late) return;
  for (auto& call : *calls) {
    // RawGrpcCode: a peer's out-of-range code must not be read as the enum.
    if (!call->started ||
        RawGrpcCode(call->status) == grpc::StatusCode::CANCELLED) {
      call->status = grpc::Status(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          absl::StrCat("no answer within ",
                       absl::FormatDuration(wait_until - attempt_start)));
    }
  }
}

// When an attempt began, when its calls' deadline is, and when calls still
// open are worth a warning (never, unless --straggler_warn_s is set).
struct AttemptTimes {
  absl::Time start;
  absl::Time deadline;
  absl::Time warn_at = absl::InfiniteFuture();
};

// The times of an attempt that starts now: its calls' deadline is
// rpc_timeout away, or sooner where a join's `backoff` (if any) gives up.
AttemptTimes TimesOfAttempt(const PsClientOptions& options,
                            const net::Backoff* backoff) {
  AttemptTimes times;
  times.start = absl::Now();
  times.deadline = times.start + options.rpc_timeout;
  if (backoff != nullptr) {
    times.deadline = std::min(times.deadline, backoff->give_up());
  }
  if (options.straggler_warn > absl::ZeroDuration()) {
    times.warn_at = times.start + options.straggler_warn;
  }
  return times;
}

// How an attempt's calls start: how many at once, and what starts the rest.
struct Waves {
  size_t first = 0;          // calls started at once
  bool in_turn = false;      // the rest one by one, each on a receipt
  bool ask_receipt = false;  // whether the first calls report their receipt
};

// The Waves of `order` for `calls`. kLocalLast moves the calls to this
// host's shards (`on_this_host`, by shard) to the end and starts them once
// every other call has been received; with none of either kind every call
// starts at once.
template <typename Request, typename Response>
Waves WavesOf(PushOrder order, const std::vector<bool>& on_this_host,
              const std::vector<ShardRequest<Request>>& requests,
              std::vector<std::unique_ptr<Call<Response>>>* calls) {
  const size_t n = calls->size();
  if (order == PushOrder::kInTurn) {
    return Waves{std::min<size_t>(n, 1), true, true};
  }
  if (order != PushOrder::kLocalLast) return Waves{n, false, false};
  const auto elsewhere = [&](const std::unique_ptr<Call<Response>>& call) {
    const uint32_t shard = requests[call->index].shard;
    return shard >= on_this_host.size() || !on_this_host[shard];
  };
  const size_t first = static_cast<size_t>(
      std::stable_partition(calls->begin(), calls->end(), elsewhere) -
      calls->begin());
  if (first == 0 || first == n) return Waves{n, false, false};
  return Waves{first, false, true};
}

// Runs `calls` (MakeCalls) on `queue` in the order `waves` gives (WavesOf),
// then awaits them (AwaitCalls), handing those open at times.warn_at to
// `warn`. A call is "received" once its shard's initial metadata came (or
// it ended).
template <typename Request, typename Response, typename Start>
void RunCalls(const std::vector<ShardRequest<Request>>& requests,
              const AttemptTimes& times, const Waves& waves,
              const std::function<void(const std::vector<size_t>&)>& warn,
              Start& start, grpc::CompletionQueue* queue,
              std::vector<std::unique_ptr<Call<Response>>>* calls) {
  size_t started = 0;
  const auto start_one = [&](bool ask_receipt) {
    Call<Response>* call = (*calls)[started++].get();
    const ShardRequest<Request>& request = requests[call->index];
    StartCall(request.shard, request.request, times.deadline, ask_receipt,
              queue, start, call);
  };
  while (started < waves.first) start_one(waves.ask_receipt);
  size_t received = 0;
  const std::function<void()> on_received = [&] {
    ++received;
    if (started == calls->size()) return;
    if (waves.in_turn) {
      start_one(true);
    } else if (received == waves.first) {
      while (started < calls->size()) start_one(false);
    }
  };
  AwaitCalls(queue, times.deadline + kCompletionGrace, times.start,
             times.warn_at, warn, on_received, calls);
}

// The calls of one attempt that are to be tried again.
struct Retries {
  std::vector<size_t> indices;  // positions in the caller's request vector
  absl::Status last_error;      // the last of their errors, for the log
};

// Whether a failed call of shard `shard` is tried again.
using RetryRule = std::function<bool(uint32_t shard, const absl::Status&)>;

// Moves each answered call's response to its place in `responses`. A failed
// call ends the fan-out with its error (naming the shard), unless `retry`
// says otherwise: then the call is listed for another attempt.
template <typename Request, typename Response>
absl::StatusOr<Retries> TakeAnswers(
    const char* method, const std::vector<std::string>& names,
    const std::vector<ShardRequest<Request>>& requests, const RetryRule& retry,
    std::vector<std::unique_ptr<Call<Response>>>* calls,
    std::vector<Response>* responses) {
  Retries retries;
  for (auto& call : *calls) {
    const uint32_t shard = requests[call->index].shard;
    const absl::Status status = FromGrpcStatus(call->status);
    if (status.ok()) {
      (*responses)[call->index] = std::move(call->response);
      continue;
    }
    if (!retry(shard, status)) {
      return ShardError(shard, names[shard], method, status);
    }
    retries.indices.push_back(call->index);
    retries.last_error = ShardError(shard, names[shard], method, status);
  }
  return retries;
}

}  // namespace

PushOrder ParsePushOrder(const std::string& name) {
  if (name == "in_turn") return PushOrder::kInTurn;
  if (name == "local_last") return PushOrder::kLocalLast;
  return PushOrder::kTogether;
}

absl::StatusOr<int> MessageBytesBound(const Partition& partition) {
  constexpr uint64_t kPerChunk = 128;
  constexpr uint64_t kSlack = 1 << 20;
  uint64_t largest = 0;
  for (uint32_t shard = 0; shard < partition.num_shards(); ++shard) {
    const uint64_t bytes = partition.ShardElements(shard) * sizeof(float) +
                           partition.ChunksOfShard(shard).size() * kPerChunk +
                           kSlack;
    largest = std::max(largest, bytes);
  }
  if (largest > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a shard's message would need ", largest,
        " bytes, more than gRPC carries (2 GiB); use more shards"));
  }
  return static_cast<int>(largest);
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(
    const std::vector<std::string>& addresses, const PsClientOptions& options,
    Logger logger) {
  if (addresses.empty()) {
    return absl::InvalidArgumentError(
        "no parameter-server shards given (--ps host:port,...)");
  }
  if (absl::Status status =
          net::CheckSecurity(options.security, net::Side::kClient);
      !status.ok()) {
    return status;
  }
  net::ChannelOptions channel_options;
  channel_options.max_message_bytes = options.max_message_bytes;
  channel_options.security = options.security;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& address : addresses) {
    if (address.empty()) {
      return absl::InvalidArgumentError("an empty shard address in --ps");
    }
    channels.push_back(net::CreateChannel(address, channel_options));
  }
  return std::make_unique<PsClient>(addresses, std::move(channels), options,
                                    std::move(logger));
}

PsClient::PsClient(std::vector<std::string> names,
                   std::vector<std::shared_ptr<grpc::Channel>> channels,
                   const PsClientOptions& options, Logger logger)
    : names_(std::move(names)),
      channels_(std::move(channels)),
      options_(options),
      logger_(std::move(logger)) {
  for (const auto& channel : channels_) {
    stubs_.push_back(tern::v1::ParameterServer::NewStub(channel));
    push_stubs_.push_back(std::make_unique<PushStub>(channel));
  }
  if (options_.push_order == PushOrder::kLocalLast) FindShardsOnThisHost();
}

void PsClient::FindShardsOnThisHost() {
  std::function<bool(const std::string&)> here = options_.on_this_host;
  if (!here) {
    absl::StatusOr<std::vector<std::string>> interfaces =
        net::InterfaceAddresses();
    if (!interfaces.ok()) {
      logger_->warn(
          "--push_order=local_last: {}; only loopback shards count as this "
          "host's",
          std::string(interfaces.status().message()));
      interfaces = std::vector<std::string>();
    }
    here = [interfaces = *std::move(interfaces)](const std::string& address) {
      return net::IsOnThisHost(address, interfaces);
    };
  }
  std::vector<uint32_t> local;
  for (uint32_t shard = 0; shard < names_.size(); ++shard) {
    on_this_host_.push_back(here(names_[shard]));
    if (on_this_host_.back()) local.push_back(shard);
  }
  logger_->info("--push_order=local_last: shards on this host, pushed last: {}",
                local.empty() ? "none" : absl::StrJoin(local, ", "));
}

template <typename Request, typename Response, typename Start>
absl::StatusOr<std::vector<Response>> PsClient::FanOut(
    const char* method, std::vector<ShardRequest<Request>> requests,
    std::optional<absl::Duration> join_budget, PushOrder order, Start start) {
  if (absl::Status status = CheckShards(method, requests, stubs_.size());
      !status.ok()) {
    return status;
  }
  std::vector<Response> responses(requests.size());
  std::vector<size_t> todo(requests.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;

  // A Join retries from the start; a step's call from its first failure,
  // and only a shard that went away or asks for the call again (ABORTED: it
  // dropped lost workers and reopened the step, --on_worker_loss=shrink).
  const absl::Duration budget =
      join_budget.value_or(options_.server_loss_timeout);
  const char* budget_flag =
      join_budget.has_value() ? "--join_timeout_s" : "--server_loss_timeout_s";
  const RetryRule retry = [&](uint32_t shard, const absl::Status& status) {
    return join_budget.has_value()
               ? net::IsTransient(status)
               : absl::IsAborted(status) || ShardLost(shard, status);
  };
  std::optional<net::Backoff> backoff;
  if (join_budget.has_value()) {
    backoff.emplace(budget, kFirstBackoff, kMaxBackoff);
  }
  const auto warn = [&](const std::vector<size_t>& open) {
    std::vector<uint32_t> shards;
    for (const size_t index : open) shards.push_back(requests[index].shard);
    WarnWaiting(method, requests[open.front()].request.worker_id(), shards);
  };
  while (!todo.empty()) {
    // A completion queue of our own, polled by this thread, declared before
    // the calls so that it outlives them: their contexts and responses live
    // on this frame until every completion has been taken off the queue.
    grpc::CompletionQueue queue;
    const AttemptTimes times =
        TimesOfAttempt(options_, backoff.has_value() ? &*backoff : nullptr);
    std::vector<std::unique_ptr<Call<Response>>> calls =
        MakeCalls<Response>(todo);
    const Waves waves = WavesOf(order, on_this_host_, requests, &calls);
    RunCalls(requests, times, waves, warn, start, &queue, &calls);
    absl::StatusOr<Retries> retries =
        TakeAnswers(method, names_, requests, retry, &calls, &responses);
    if (!retries.ok()) return retries.status();
    todo = std::move(retries->indices);
    if (todo.empty()) break;
    if (!backoff.has_value()) {
      logger_->warn("{}; retrying for up to {} ({})",
                    std::string(retries->last_error.message()),
                    absl::FormatDuration(budget), budget_flag);
      backoff.emplace(budget, kFirstBackoff, kMaxBackoff);
    }
    if (absl::Status status = PauseBeforeRetry(budget, budget_flag,
                                               retries->last_error, &*backoff);
        !status.ok()) {
      return status;
    }
  }
  return responses;
}

bool PsClient::ShardLost(uint32_t shard, const absl::Status& status) const {
  if (absl::IsUnavailable(status)) return true;
  // A barrier's own expiry comes over a working connection and names the
  // missing workers: not a lost shard.
  return absl::IsDeadlineExceeded(status) &&
         channels_[shard]->GetState(/*try_to_connect=*/false) !=
             GRPC_CHANNEL_READY;
}

absl::Status PsClient::PauseBeforeRetry(absl::Duration budget,
                                        const char* budget_flag,
                                        const absl::Status& last_error,
                                        net::Backoff* backoff) {
  const int attempts = backoff->attempts() + 1;
  if (backoff->left() <= absl::ZeroDuration()) {
    return absl::Status(
        last_error.code(),
        absl::StrCat(last_error.message(), " (gave up after ", attempts,
                     " attempts in ", absl::FormatDuration(budget), ", ",
                     budget_flag, ")"));
  }
  logger_->info("{} (attempt {}); retrying in {}",
                std::string(last_error.message()), attempts,
                absl::FormatDuration(backoff->next_pause()));
  backoff->Wait();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JoinResponse>> PsClient::Join(
    const JoinRequest& request) {
  return Join(std::vector<JoinRequest>(stubs_.size(), request));
}

absl::StatusOr<std::vector<JoinResponse>> PsClient::Join(
    std::vector<JoinRequest> per_shard) {
  if (per_shard.size() != stubs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        per_shard.size(), " join requests for ", stubs_.size(), " shards"));
  }
  std::vector<ShardRequest<JoinRequest>> requests(stubs_.size());
  for (uint32_t shard = 0; shard < stubs_.size(); ++shard) {
    requests[shard].shard = shard;
    requests[shard].request = std::move(per_shard[shard]);
    requests[shard].request.set_shard_index(shard);
  }
  return FanOut<JoinRequest, JoinResponse>(
      "Join", std::move(requests), options_.join_timeout, PushOrder::kTogether,
      [this](uint32_t shard, grpc::ClientContext* context,
             const JoinRequest& req, grpc::CompletionQueue* queue) {
        return stubs_[shard]->AsyncJoin(context, req, queue);
      });
}

absl::StatusOr<std::vector<ShareScalersResponse>> PsClient::ShareScalers(
    std::vector<ShardRequest<ShareScalersRequest>> requests) {
  return FanOut<ShareScalersRequest, ShareScalersResponse>(
      "ShareScalers", std::move(requests), /*join_budget=*/std::nullopt,
      PushOrder::kTogether,
      [this](uint32_t shard, grpc::ClientContext* context,
             const ShareScalersRequest& req, grpc::CompletionQueue* queue) {
        return stubs_[shard]->AsyncShareScalers(context, req, queue);
      });
}

absl::StatusOr<std::vector<PushPullResponse>> PsClient::PushPull(
    std::vector<ShardRequest<PushPullRequest>> requests) {
  // Each push is written once, its data sent from where the encoder left
  // it (worker/push_request_bytes.h); a retry sends the same bytes.
  std::vector<ShardRequest<SerializedPush>> pushes(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    pushes[i].shard = requests[i].shard;
    pushes[i].request.worker = requests[i].request.worker_id();
    pushes[i].request.bytes =
        PushRequestBuffer(std::move(requests[i].request));
  }
  return FanOut<SerializedPush, PushPullResponse>(
      "PushPull", std::move(pushes), /*join_budget=*/std::nullopt,
      options_.push_order,
      [this](uint32_t shard, grpc::ClientContext* context,
             const SerializedPush& push, grpc::CompletionQueue* queue) {
        auto reader = push_stubs_[shard]->PrepareUnaryCall(
            context, kPushPullMethod, push.bytes, queue);
        reader->StartCall();
        return reader;
      });
}

absl::Status PsClient::CheckParams(const CheckParamsRequest& request) {
  std::vector<ShardRequest<CheckParamsRequest>> requests(stubs_.size());
  for (uint32_t shard = 0; shard < stubs_.size(); ++shard) {
    requests[shard].shard = shard;
    requests[shard].request = request;
  }
  return FanOut<CheckParamsRequest, CheckParamsResponse>(
             "CheckParams", std::move(requests), /*join_budget=*/std::nullopt,
             PushOrder::kTogether,
             [this](uint32_t shard, grpc::ClientContext* context,
                    const CheckParamsRequest& req,
                    grpc::CompletionQueue* queue) {
               return stubs_[shard]->AsyncCheckParams(context, req, queue);
             })
      .status();
}

}  // namespace tern::worker

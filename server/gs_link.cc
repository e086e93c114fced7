#include "server/gs_link.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/net/backoff.h"
#include "common/net/channel.h"
#include "server/wire.h"

namespace tern::server {
namespace {

// How often the thread looks for a new round (and at Stop).
constexpr absl::Duration kPoll = absl::Milliseconds(100);
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(200);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

}  // namespace

GsLink::GsLink(GsLinkOptions options, LocalPs* lps, Logger logger)
    : options_(std::move(options)), lps_(lps), logger_(std::move(logger)) {
  net::ChannelOptions channel_options;
  channel_options.max_message_bytes = options_.max_message_bytes;
  channel_options.security = options_.security;
  stub_ = tern::v1::GlobalServer::NewStub(
      net::CreateChannel(options_.address, channel_options));
}

GsLink::~GsLink() { Stop(); }

void GsLink::Start() {
  thread_ = std::thread([this] { Run(); });
}

void GsLink::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_.HasBeenNotified()) stop_.Notify();
    if (current_ != nullptr) current_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status GsLink::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

template <typename Call>
absl::Status GsLink::Attempt(absl::Duration deadline, Call call) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  {
    absl::MutexLock lock(&mu_);
    if (stop_.HasBeenNotified()) return absl::CancelledError("stopping");
    current_ = &context;
  }
  const grpc::Status status = call(&context);
  absl::MutexLock lock(&mu_);
  current_ = nullptr;
  return FromGrpcStatus(status);
}

absl::StatusOr<tern::v1::RegisterResponse> GsLink::Register(
    const GsRegistration& registration) {
  tern::v1::RegisterRequest request;
  request.set_datacenter(options_.datacenter);
  request.set_num_datacenters(options_.num_datacenters);
  request.set_param_spec_hash(registration.param_spec_hash);
  request.set_param_checksum(registration.param_checksum);
  request.mutable_chunk_elements()->Assign(registration.chunk_elements.begin(),
                                           registration.chunk_elements.end());
  request.set_update_codec(
      static_cast<tern::v1::Codec>(registration.update_codec));
  request.set_update_layout(
      static_cast<tern::v1::Layout>(registration.update_layout));
  net::Backoff backoff(options_.give_up, kFirstBackoff, kMaxBackoff);
  while (true) {
    tern::v1::RegisterResponse response;
    const absl::Status status =
        Attempt(options_.register_timeout, [&](grpc::ClientContext* context) {
          return stub_->Register(context, request, &response);
        });
    if (status.ok()) return response;
    if (!net::IsTransient(status)) return status;
    logger_->debug("Register: {}; retrying", std::string(status.message()));
    if (!backoff.Wait(&stop_)) return status;
  }
}

absl::StatusOr<GsAnswer> GsLink::Sync(const SyncRound& round) {
  tern::v1::SyncRoundRequest request;
  request.set_datacenter(options_.datacenter);
  request.set_round(round.round);
  for (const ChunkPayload& update : round.updates) {
    tern::v1::ChunkPayload* wire = request.add_updates();
    wire->set_chunk_key(update.chunk_key);
    PayloadToWire(update.payload, wire->mutable_payload());
  }
  net::Backoff backoff(options_.give_up, kFirstBackoff, kMaxBackoff);
  while (true) {
    tern::v1::SyncRoundResponse response;
    absl::Status status =
        Attempt(sync_deadline_, [&](grpc::ClientContext* context) {
          return stub_->SyncRound(context, request, &response);
        });
    if (status.ok()) {
      GsAnswer answer;
      answer.round = response.round();
      answer.lagging.assign(response.lagging().begin(),
                            response.lagging().end());
      for (const tern::v1::ChunkPayload& chunk : response.average()) {
        absl::StatusOr<kernels::Payload> payload =
            PayloadFromWire(chunk.payload());
        if (!payload.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "answer to round ", round.round, ": chunk ", chunk.chunk_key(),
              ": ", payload.status().message()));
        }
        answer.average.push_back(
            ChunkPayload{chunk.chunk_key(), *std::move(payload)});
      }
      return answer;
    }
    if (!net::IsTransient(status)) return status;
    logger_->warn("round {}: {}; retrying", round.round,
                  std::string(status.message()));
    if (!backoff.Wait(&stop_)) return status;
  }
}

absl::Status GsLink::RunRounds() {
  std::optional<GsRegistration> registration;
  while (!registration.has_value()) {
    if (stop_.HasBeenNotified()) return absl::OkStatus();
    absl::StatusOr<std::optional<GsRegistration>> ready =
        lps_->WaitForRegistration(kPoll);
    if (!ready.ok()) return absl::OkStatus();  // closed or failed already
    registration = *ready;
  }
  absl::StatusOr<tern::v1::RegisterResponse> registered =
      Register(*registration);
  if (!registered.ok()) {
    return absl::Status(
        registered.status().code(),
        absl::StrCat("Register: ", registered.status().message()));
  }
  if (absl::Status status = lps_->CheckFirstRound(registered->next_round());
      !status.ok()) {
    return status;
  }
  // A deadline above t_global + hold_timeout never cuts an answer short
  // (global_server.proto, RegisterResponse).
  sync_deadline_ = absl::Seconds(registered->t_global_s()) +
                   absl::Seconds(registered->hold_timeout_s()) +
                   options_.sync_margin;
  logger_->info(
      "registered with the global server as data center {} of {}: t_global "
      "{}s, hold timeout {}s, max lag {}",
      options_.datacenter, options_.num_datacenters, registered->t_global_s(),
      registered->hold_timeout_s(), registered->max_lag());
  while (!stop_.HasBeenNotified()) {
    absl::StatusOr<std::optional<SyncRound>> next = lps_->NextRound(kPoll);
    if (absl::IsCancelled(next.status())) return absl::OkStatus();  // done
    if (!next.ok()) return absl::OkStatus();  // closed or failed already
    if (!next->has_value()) continue;
    const SyncRound& round = **next;
    const absl::Time sent = absl::Now();
    absl::StatusOr<GsAnswer> answer = Sync(round);
    if (stop_.HasBeenNotified()) return absl::OkStatus();
    if (!answer.ok()) {
      return absl::Status(
          answer.status().code(),
          absl::StrCat("round ", round.round, ": ", answer.status().message()));
    }
    if (absl::Status status =
            lps_->ApplyRoundAnswer(round, *answer, absl::Now() - sent);
        !status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("applying the answer to round ",
                                       round.round, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

void GsLink::Run() {
  absl::Status status = RunRounds();
  if (status.ok()) return;
  status = absl::UnavailableError(absl::StrCat(
      "the global server at ", options_.address, ": ", status.message()));
  logger_->error("{}", std::string(status.message()));
  {
    absl::MutexLock lock(&mu_);
    status_ = status;
  }
  lps_->Fail(status);
}

}  // namespace tern::server

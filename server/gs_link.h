// The synchronizer's client (DESIGN section 4): the thread through which a
// WeightGrad local parameter server talks to the global server (GS). It
// registers once worker 0 has joined (each attempt with a deadline, retried
// while the GS is unreachable, for at most give_up), then sends the rounds
// LocalPs builds, one at a time and in order: SyncRound with a deadline
// above the GS's t_global + hold_timeout (from Register), retried while the
// answer is UNAVAILABLE or late (a hold past the GS's hold timeout, a GS
// that is restarting), at most give_up in all; each answer goes to
// LocalPs::ApplyRoundAnswer. A failure it cannot retry, or retries past
// give_up, fail the LPS (LocalPs::Fail) with the GS's address in the
// message, and the process exits. The channel's retry policy
// (common/net/channel.h) retries UNAVAILABLE within one attempt; the loops
// here outlast attempts (a GS restarting, a hold past its hold timeout)
// with common/net/backoff.h.
//
// Thread safety: Start and Stop from one thread; status() from any.
#ifndef TERN_SERVER_GS_LINK_H_
#define TERN_SERVER_GS_LINK_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/net/credentials.h"
#include "grpcpp/client_context.h"
#include "server/local_ps.h"
#include "tern/v1/global_server.grpc.pb.h"

namespace tern::server {

struct GsLinkOptions {
  // host:port of `tern global` (--global).
  std::string address;
  uint32_t datacenter = 0;
  uint32_t num_datacenters = 1;
  // Deadline of one Register attempt.
  absl::Duration register_timeout = absl::Seconds(10);
  // Margin above t_global + hold_timeout for a SyncRound's deadline.
  absl::Duration sync_margin = absl::Seconds(10);
  // How long registration or one round may keep failing transiently
  // before the LPS gives up (--join_timeout_s).
  absl::Duration give_up = absl::Seconds(300);
  int max_message_bytes = 64 << 20;
  // Plaintext or TLS (the LPS's --tls_* files), already checked.
  net::TransportSecurity security;
};

class GsLink {
 public:
  GsLink(GsLinkOptions options, LocalPs* lps, Logger logger);
  ~GsLink();
  GsLink(const GsLink&) = delete;
  GsLink& operator=(const GsLink&) = delete;

  void Start();
  // Ends the thread: cancels a call in flight and joins.
  void Stop();
  // OK while the link works and after the final round; the error that
  // failed the LPS otherwise.
  absl::Status status() const;

 private:
  void Run();
  absl::Status RunRounds();
  absl::StatusOr<tern::v1::RegisterResponse> Register(
      const GsRegistration& registration);
  absl::StatusOr<GsAnswer> Sync(const SyncRound& round);
  // One call with `deadline`, cancellable by Stop.
  template <typename Call>
  absl::Status Attempt(absl::Duration deadline, Call call);

  const GsLinkOptions options_;
  LocalPs* const lps_;
  const Logger logger_;
  std::unique_ptr<tern::v1::GlobalServer::Stub> stub_;
  absl::Duration sync_deadline_ = absl::Seconds(60);

  std::thread thread_;
  // Notified by Stop: ends the retry pauses and the loop.
  absl::Notification stop_;
  mutable absl::Mutex mu_;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tern::server

#endif  // TERN_SERVER_GS_LINK_H_

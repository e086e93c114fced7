// A worker's straggler warning: when a step's call has waited
// --straggler_warn_s, the shards it waits on are asked what their open step
// waits for, so that every worker's log names the late worker (issue 16),
// not only the shard's.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "worker/ps_client.h"

namespace tern::worker {
namespace {

// The Waiting call's own deadline: short, as it only improves a log line.
constexpr absl::Duration kWaitingDeadline = absl::Seconds(2);
// What a shard's answer may add to the log line.
constexpr size_t kMaxWaitingFor = 200;

// The shard's "waited" figure, which this worker does not trust to be sane.
std::string WaitedText(double seconds) {
  if (!(seconds >= 0 && seconds < 1e7)) return "an unknown time";
  // To a tenth of a second.
  return absl::FormatDuration(
      absl::Milliseconds(static_cast<int64_t>(seconds * 10) * 100));
}

}  // namespace

void PsClient::WarnWaiting(const char* method, uint32_t worker_id,
                           const std::vector<uint32_t>& shards) const {
  const std::string waited = absl::FormatDuration(options_.straggler_warn);
  for (const uint32_t shard : shards) {
    tern::v1::WaitingRequest request;
    request.set_worker_id(worker_id);
    tern::v1::WaitingResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(
        absl::Now() + std::min(kWaitingDeadline, options_.rpc_timeout)));
    const grpc::Status status =
        stubs_[shard]->Waiting(&context, request, &response);
    if (status.ok() && !response.waiting_for().empty()) {
      logger_->warn(
          "{}: no answer from shard {} ({}) after {}: its step {} waits for "
          "{}, {} after the first worker's call (a straggler? "
          "--straggler_warn_s)",
          method, shard, names_[shard], waited, response.step(),
          response.waiting_for().substr(0, kMaxWaitingFor),
          WaitedText(response.waited_s()));
      continue;
    }
    logger_->warn(
        "{}: no answer from shard {} ({}) after {}: a worker is late or the "
        "shard is slow; the shard's log names the workers it waits for "
        "(--straggler_warn_s)",
        method, shard, names_[shard], waited);
  }
}

}  // namespace tern::worker

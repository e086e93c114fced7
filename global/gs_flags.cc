#include "global/gs_flags.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/net/tls_flags.h"
#include "common/process/server_role_flags.h"
#include "common/status_macros.h"

namespace tern::global {
namespace {

using flags::FinitePositive;
using flags::Flag;

// A round's stored answers are kept for 2 x (max_lag + 1) rounds; a bound keeps
// that memory finite and the flag meaningful.
constexpr uint32_t kMaxMaxLag = 1000;

}  // namespace

void AddGsFlags(CLI::App* app, GsOptions* o) {
  constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
  process::AddServerRoleFlags(
      app, o,
      {.report_file = "the GS writes its report here as it stops: rounds and "
                      "bytes (JSON; empty: none)",
       .max_message_mb = "largest message sent or received, in MiB; a "
                         "round's answer for the whole model must fit",
       .state_dir =
           "keep the global server's state in this directory "
           "(global.state, rewritten as data centers register, at each "
           "round's close and at each late answer) and resume from it when "
           "restarted with the same --num_datacenters and --seed, so that a "
           "killed GS does not end the run; empty: none",
       .state_sync = "with --state_dir: flush each state write to disk "
                     "(survives a machine crash, not only a killed process)",
       .log_level = "trace, debug, info (one line per round), warn, error, "
                    "critical or off"});
  Flag(app, "num_datacenters", &o->num_datacenters,
       "K: the data centers (local parameter servers) that register")
      ->check(CLI::Range(1u, kU32Max));
  Flag(app, "seed", &o->seed,
       "run seed of the answers' stochastic rounding (TernGrad answers)");
  Flag(app, "t_global_s", &o->t_global_s,
       "T_global: how long a round waits for the last data centers after "
       "its first update arrived; then it closes and marks them lagging")
      ->check(FinitePositive());
  Flag(app, "max_lag", &o->max_lag,
       "rounds a data center may lag behind before the GS holds the "
       "answers to the others (bounded staleness)")
      ->check(CLI::Range(0u, kMaxMaxLag));
  Flag(app, "hold_timeout_s", &o->hold_timeout_s,
       "how long a held call waits before it is answered UNAVAILABLE "
       "naming the lagging data centers (the LPS retries)")
      ->check(FinitePositive());
}

absl::Status ValidateGsOptions(const GsOptions& o) {
  TERN_RETURN_IF_ERROR(
      process::ValidateServerRoleOptions(o, net::TlsUse::kServe));
  if (o.num_datacenters == 0) {
    return absl::InvalidArgumentError("--num_datacenters must be at least 1");
  }
  TERN_RETURN_IF_ERROR(flags::CheckFinitePositive("t_global_s", o.t_global_s));
  if (o.max_lag > kMaxMaxLag) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_lag=", o.max_lag, " is not in [0, ", kMaxMaxLag, "]"));
  }
  return flags::CheckFinitePositive("hold_timeout_s", o.hold_timeout_s);
}

}  // namespace tern::global

#include "global/gs_flags.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/metrics/metrics_flags.h"
#include "common/net/pacing_flag.h"
#include "common/net/tls_flags.h"
#include "common/status_macros.h"

namespace tern::global {
namespace {

using flags::FinitePositive;
using flags::Flag;
using flags::HostPort;
using flags::IsHostPort;
using flags::kMaxMessageMb;
using flags::LogLevel;

// A round's stored answers are kept for 2 x (max_lag + 1) rounds; a bound keeps
// that memory finite and the flag meaningful.
constexpr uint32_t kMaxMaxLag = 1000;

}  // namespace

void AddGsFlags(CLI::App* app, GsOptions* o) {
  constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
  Flag(app, "listen", &o->listen,
       "host:port to serve on; port 0 picks a free port (see --port_file)")
      ->check(HostPort());
  Flag(app, "port_file", &o->port_file,
       "file the bound port is written to once the GS serves (empty: none)");
  Flag(app, "report_file", &o->report_file,
       "the GS writes its report here as it stops: rounds and bytes (JSON; "
       "empty: none)");
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
  Flag(app, "max_message_mb", &o->max_message_mb,
       "largest message sent or received, in MiB; a round's answer for the "
       "whole model must fit")
      ->check(CLI::Range(1u, kMaxMessageMb));
  net::AddPaceFlag(app, &o->pace_mbit);
  Flag(app, "state_dir", &o->state_dir,
       "keep the global server's state in this directory (global.state, "
       "rewritten as data centers register, at each round's close and at "
       "each late answer) and resume from it when restarted with the same "
       "--num_datacenters and --seed, so that a killed GS does not end the "
       "run; empty: none");
  Flag(app, "state_sync", &o->state_sync,
       "with --state_dir: flush each state write to disk (survives a machine "
       "crash, not only a killed process)");
  Flag(app, "log_level", &o->log_level,
       "trace, debug, info (one line per round), warn, error, critical or "
       "off")
      ->check(LogLevel());
  net::AddTlsFlags(app, &o->tls);
  net::AddInsecureFlag(app, &o->insecure);
  metrics::AddMetricsFlags(app, &o->metrics);
  net::AddServingRunIdFlag(app, &o->run_id);
}

absl::Status ValidateGsOptions(const GsOptions& o) {
  TERN_RETURN_IF_ERROR(metrics::ValidateMetricsOptions(o.metrics));
  if (!IsHostPort(o.listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: '", o.listen, "' is not of the form host:port"));
  }
  TERN_RETURN_IF_ERROR(net::ValidateServingRunId(o.run_id));
  if (o.num_datacenters == 0) {
    return absl::InvalidArgumentError("--num_datacenters must be at least 1");
  }
  TERN_RETURN_IF_ERROR(flags::CheckFinitePositive("t_global_s", o.t_global_s));
  if (o.max_lag > kMaxMaxLag) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_lag=", o.max_lag, " is not in [0, ", kMaxMaxLag, "]"));
  }
  TERN_RETURN_IF_ERROR(
      flags::CheckFinitePositive("hold_timeout_s", o.hold_timeout_s));
  TERN_RETURN_IF_ERROR(
      flags::CheckMessageAndLogFlags(o.max_message_mb, o.log_level));
  return net::ValidateServingTransport(o.tls, o.insecure, net::TlsUse::kServe,
                                       o.listen);
}

}  // namespace tern::global

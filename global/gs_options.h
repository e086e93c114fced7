// Everything `tern global` is configured with. tern/main.cc fills it from
// flags and environment variables (TERN_<FLAG>).
#ifndef TERN_GLOBAL_GS_OPTIONS_H_
#define TERN_GLOBAL_GS_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/process/server_role_options.h"

namespace tern::global {

// The flags every server role has are ServerRoleOptions'
// (common/process/server_role_options.h). Of them, here:
// report_file is the GS's report (rounds and bytes); state_dir holds
// global.state (registrations, the open round, the kept answers;
// global/gs_state.h), flushed to disk at each write by default; register
// refuses a model whose answer could exceed max_message_mb.
struct GsOptions : process::ServerRoleOptions {
  GsOptions() {
    listen = "127.0.0.1:50061";
    state_sync = true;
  }

  // K: the data centers (LPSs) that exchange updates through this GS.
  uint32_t num_datacenters = 1;
  // The run seed of the answers' stochastic rounding (TernGrad answers).
  uint64_t seed = 1;
  // T_global: how long a round waits for the last data centers after its
  // first update arrived; then it closes and marks them lagging.
  double t_global_s = 10;
  // How many rounds a data center may lag behind the open round before the
  // GS holds the answers to the others (bounded staleness).
  uint32_t max_lag = 2;
  // How long a held call waits before it is answered UNAVAILABLE (the LPS
  // retries). An LPS's SyncRound deadline should exceed
  // t_global_s + hold_timeout_s.
  double hold_timeout_s = 30;
};

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_OPTIONS_H_

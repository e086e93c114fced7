// --pace_mbit, the one flag of pacing.h, as `tern worker` and `tern ps`
// register it.
#ifndef TERN_COMMON_NET_PACING_FLAG_H_
#define TERN_COMMON_NET_PACING_FLAG_H_

#include "common/flags/cli_fwd.h"

namespace tern::net {

// Registers --pace_mbit (TERN_PACE_MBIT) into `*pace_mbit`: a number from
// 0 (no pacing, the default) to kMaxPaceMbit.
CLI::Option* AddPaceFlag(CLI::App* app, double* pace_mbit);

}  // namespace tern::net

#endif  // TERN_COMMON_NET_PACING_FLAG_H_

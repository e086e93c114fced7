#include "common/net/pacing_flag.h"

#include "common/flags/flags.h"
#include "common/net/pacing.h"

namespace tern::net {

CLI::Option* AddPaceFlag(CLI::App* app, double* pace_mbit) {
  return flags::Flag(
             app, "pace_mbit", pace_mbit,
             "cap each TCP connection this process sends on to another host "
             "at this many mbit/s (0: no cap). Over slow links of known rate, "
             "0.95 x the link's rate / the connections that send on it at "
             "once: with a shard on each of N worker hosts, rate x 0.95 / "
             "(N - 1) for the workers and the shards alike. Connections "
             "within the host are never capped (worker/README.md)")
      ->check(flags::FiniteIn(0, kMaxPaceMbit));
}

}  // namespace tern::net

// How `tern launch` brings up what its workers need: the emulated WAN
// (deploy/wan/tern-wan, under --emulate_wan), then the servers, S shards
// or the global server and one LPS per data center, each of which reports
// the port it bound in a port file. Failures are recorded in the run's
// LaunchOutcome (the console says why); the functions never throw or exit.
#ifndef TERN_TERN_SERVER_STARTUP_H_
#define TERN_TERN_SERVER_STARTUP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tern/launch_context.h"

namespace tern {

// Reads a port that a server wrote: a decimal number in [1, 65535],
// perhaps followed by a newline. Nothing while the file is absent or still
// partial.
std::optional<uint32_t> ReadPort(const std::string& path);

// OUT/<name with "/" as "-">.port.
std::string PortFileOf(const std::string& out_dir, const std::string& name);

// `tern-wan up`, interruptible, at most 5 minutes. True when `tern-wan
// down` must run at the end: unless tern-wan refused (exit code 2) before
// making anything, a failed or interrupted up may have made part of it.
bool BringUpWan(const LaunchContext& run);

// `tern-wan down`, not interruptible (a Ctrl-C now must not leave
// namespaces behind); a failure is a failure of the run.
void TakeDownWan(const LaunchContext& run);

// The servers that serve, by the order in which they stop.
struct StartedServers {
  std::vector<size_t> lps;         // the LPSs' children (stopped first)
  std::vector<size_t> first_tier;  // the shards', or the global server's
  // Per worker: what it is told to connect to: "host:port,..." of every
  // shard, or its LPS's "host:port".
  std::vector<std::string> worker_targets;
};

// Starts the servers of the run's mode and waits until all serve (at most
// --start_timeout_s each tier). When the outcome is no longer ok on return,
// worker_targets are incomplete and must not be used.
StartedServers StartServers(const LaunchContext& run);

}  // namespace tern

#endif  // TERN_TERN_SERVER_STARTUP_H_

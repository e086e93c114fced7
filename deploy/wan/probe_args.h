// Command-line parsing for net_probe (deploy/wan/net_probe.cc).
//
// net_probe uses only the C++ standard library and POSIX sockets (it runs
// inside the emulated WAN's namespaces, where nothing else is needed), so
// failures are reported as a message string instead of absl::Status.
#ifndef TERN_DEPLOY_WAN_PROBE_ARGS_H_
#define TERN_DEPLOY_WAN_PROBE_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tern::wan {

enum class ProbeMode { kListen, kSend };

struct ProbeArgs {
  ProbeMode mode = ProbeMode::kListen;
  // listen: the address to bind; send: the address to connect to.
  std::string address = "127.0.0.1";
  // listen: 0 picks a free port (printed on stdout); send: must be > 0.
  int port = 0;
  // listen: measure for this long after the accept, then answer (0: until
  // the sender closes its write side). send: stop sending after this long.
  // A listener's window shorter than the sender's makes the result
  // independent of how much the sender's socket buffers hold.
  double seconds = 0;
  // send only: send exactly this many bytes, then close the write side.
  // A sender takes exactly one of --bytes and --seconds; -1: not given.
  int64_t bytes = -1;
  // The longest any single socket operation (accept, connect, a send, a
  // receive, the answer) may wait for progress.
  double timeout_s = 10;
  bool help = false;
};

// The usage text (`net_probe --help`).
std::string ProbeUsage();

// Parses argv[1..] ("listen" or "send" first, then --flag value or
// --flag=value). On failure returns false and sets *error to a message that
// names the flag and the value.
bool ParseProbeArgs(const std::vector<std::string>& args, ProbeArgs* out,
                    std::string* error);

}  // namespace tern::wan

#endif  // TERN_DEPLOY_WAN_PROBE_ARGS_H_

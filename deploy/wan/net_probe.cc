// net_probe: one TCP goodput measurement between two hosts, for
// `tern-wan check` (deploy/wan/tern-wan). See ProbeUsage() for the flags and
// probe.h for the protocol.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "deploy/wan/probe.h"
#include "deploy/wan/probe_args.h"

int main(int argc, char** argv) {
  using tern::wan::ProbeArgs;
  // Sends use MSG_NOSIGNAL; this also covers anything else that writes to a
  // closed socket or pipe.
  std::signal(SIGPIPE, SIG_IGN);
  ProbeArgs args;
  std::string error;
  if (!tern::wan::ParseProbeArgs(
          std::vector<std::string>(argv + 1, argv + argc), &args, &error)) {
    std::fprintf(stderr, "net_probe: %s (see net_probe --help)\n",
                 error.c_str());
    return 2;
  }
  if (args.help) {
    std::fputs(tern::wan::ProbeUsage().c_str(), stdout);
    return 0;
  }
  tern::wan::ProbeResult result;
  if (args.mode == tern::wan::ProbeMode::kListen) {
    std::unique_ptr<tern::wan::Listener> listener =
        tern::wan::Listener::Open(args.address, args.port, &error);
    if (listener == nullptr) {
      std::fprintf(stderr, "net_probe listen: %s\n", error.c_str());
      return 1;
    }
    std::printf("listening port=%d\n", listener->port());
    std::fflush(stdout);
    if (!listener->ServeOne(args.seconds, args.timeout_s, &result, &error)) {
      std::fprintf(stderr, "net_probe listen: %s\n", error.c_str());
      return 1;
    }
  } else {
    tern::wan::SendOptions options;
    options.address = args.address;
    options.port = args.port;
    options.bytes = args.bytes;
    options.seconds = args.seconds;
    options.timeout_s = args.timeout_s;
    if (!tern::wan::Send(options, &result, &error)) {
      std::fprintf(stderr, "net_probe send: %s\n", error.c_str());
      return 1;
    }
  }
  std::printf("%s\n", tern::wan::FormatResult(result).c_str());
  return 0;
}

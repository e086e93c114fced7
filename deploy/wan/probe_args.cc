#include "deploy/wan/probe_args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tern::wan {
namespace {

// Upper bounds that catch typos (a duration in milliseconds, a size in bits)
// rather than limits of the probe itself.
constexpr double kMaxSeconds = 3600;
constexpr int64_t kMaxBytes = int64_t{1} << 50;

bool ParseDouble(const std::string& flag, const std::string& text, double lo,
                 double hi, bool lo_inclusive, double* out,
                 std::string* error) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const bool in_range =
      (lo_inclusive ? v >= lo : v > lo) && v <= hi && std::isfinite(v);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 ||
      !in_range) {
    *error = "--" + flag + ": '" + text + "' is not a number in " +
             (lo_inclusive ? "[" : "(") + std::to_string(lo) + ", " +
             std::to_string(hi) + "]";
    return false;
  }
  *out = v;
  return true;
}

bool ParseInt(const std::string& flag, const std::string& text, int64_t lo,
              int64_t hi, int64_t* out, std::string* error) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 ||
      v < lo || v > hi) {
    *error = "--" + flag + ": '" + text + "' is not an integer in [" +
             std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return false;
  }
  *out = v;
  return true;
}

// What the flags said that ProbeArgs does not show.
struct FlagsGiven {
  bool address = false;
  bool seconds = false;
};

// Splits args[*i] ("--flag value" or "--flag=value") into `flag` (without
// the dashes) and `value`, moving *i past a separate value.
bool SplitFlag(const std::vector<std::string>& args, size_t* i,
               std::string* flag, std::string* value, std::string* error) {
  *flag = args[*i];
  if (flag->rfind("--", 0) != 0) {
    *error = "unexpected argument '" + *flag + "'";
    return false;
  }
  *flag = flag->substr(2);
  const size_t eq = flag->find('=');
  if (eq != std::string::npos) {
    *value = flag->substr(eq + 1);
    *flag = flag->substr(0, eq);
  } else if (*i + 1 < args.size()) {
    *value = args[++*i];
  } else {
    *error = "--" + *flag + " needs a value";
    return false;
  }
  return true;
}

// Sets the field of `parsed` that --`flag` names from `value`.
bool ApplyFlag(const std::string& flag, const std::string& value,
               ProbeArgs* parsed, FlagsGiven* given, std::string* error) {
  int64_t n = 0;
  if (flag == "address") {
    if (value.empty()) {
      *error = "--address: empty";
      return false;
    }
    parsed->address = value;
    given->address = true;
  } else if (flag == "port") {
    if (!ParseInt(flag, value, 0, 65535, &n, error)) return false;
    parsed->port = static_cast<int>(n);
  } else if (flag == "seconds") {
    if (!ParseDouble(flag, value, 0, kMaxSeconds, /*lo_inclusive=*/false,
                     &parsed->seconds, error)) {
      return false;
    }
    given->seconds = true;
  } else if (flag == "bytes") {
    if (!ParseInt(flag, value, 0, kMaxBytes, &parsed->bytes, error)) {
      return false;
    }
  } else if (flag == "timeout_s") {
    if (!ParseDouble(flag, value, 0, kMaxSeconds, /*lo_inclusive=*/false,
                     &parsed->timeout_s, error)) {
      return false;
    }
  } else {
    *error = "unknown flag --" + flag;
    return false;
  }
  return true;
}

// The flags a mode needs, and those it must not have.
bool CheckModeFlags(const ProbeArgs& parsed, const FlagsGiven& given,
                    std::string* error) {
  if (parsed.mode == ProbeMode::kListen && parsed.bytes >= 0) {
    *error = "--bytes: only a sender takes it";
    return false;
  }
  if (parsed.mode == ProbeMode::kSend) {
    if (!given.address) {
      *error = "--address: a sender needs the listener's address";
      return false;
    }
    if (parsed.port == 0) {
      *error = "--port: a sender needs the listener's port (1..65535)";
      return false;
    }
    if ((parsed.bytes >= 0) == given.seconds) {
      *error = "a sender takes exactly one of --bytes and --seconds";
      return false;
    }
  }
  return true;
}

}  // namespace

std::string ProbeUsage() {
  return R"(net_probe: measures TCP goodput between two hosts (tern-wan check).

  net_probe listen [--address A] [--port P] [--seconds D] [--timeout_s T]
      Accepts one connection on A:P (port 0: any free port), reads what
      arrives for D seconds after the accept (no D: until the sender closes),
      answers the sender with the count, and prints the result.
  net_probe send --address A --port P (--bytes N | --seconds D)
                 [--timeout_s T]
      Connects to a listener (retrying while it is not up yet), sends N bytes
      or sends for up to D seconds, stops early when the listener answers,
      and prints the listener's count.

Both print one line on stdout:
  goodput_mb_per_s=<MB/s, 1 MB = 10^6 bytes> bytes=<N> seconds=<S>
measured at the receiver, from the accept to the last byte (or to the end
of its window). A listener first prints "listening port=<P>". Every socket operation gives up
after T seconds without progress (default 10). Exit code: 0 measured,
1 a socket error or timeout, 2 bad flags.
)";
}

bool ParseProbeArgs(const std::vector<std::string>& args, ProbeArgs* out,
                    std::string* error) {
  ProbeArgs parsed;
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    parsed.help = true;
    *out = parsed;
    return true;
  }
  if (args.empty() || (args[0] != "listen" && args[0] != "send")) {
    *error = "the first argument must be 'listen' or 'send'" +
             (args.empty() ? std::string() : ", not '" + args[0] + "'");
    return false;
  }
  parsed.mode = args[0] == "listen" ? ProbeMode::kListen : ProbeMode::kSend;
  FlagsGiven given;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      parsed.help = true;
      continue;
    }
    std::string flag;
    std::string value;
    if (!SplitFlag(args, &i, &flag, &value, error) ||
        !ApplyFlag(flag, value, &parsed, &given, error)) {
      return false;
    }
  }
  if (parsed.help) {
    *out = parsed;
    return true;
  }
  if (!CheckModeFlags(parsed, given, error)) return false;
  *out = parsed;
  return true;
}

}  // namespace tern::wan

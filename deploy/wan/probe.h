// TCP goodput between two endpoints, for checking the emulated WAN
// (tern-wan check). One connection per measurement: the sender pushes bytes,
// the listener counts what arrives and answers with its count and duration,
// so the figure is what the receiver got, not what the sender's kernel
// buffered.
//
// Wire: the sender sends raw bytes (zeros) and may close its write side; the
// listener answers one ASCII line "tern-probe bytes=<N> micros=<M>\n", closes
// its write side, and drains until the sender closes. The sender stops
// sending as soon as that line arrives and resets the connection (SO_LINGER
// 0), so data still in its buffers is dropped instead of drained.
//
// Standard library and POSIX sockets only, IPv4. Every socket operation
// waits at most `timeout_s` for progress. Errors are returned as false plus
// a message; nothing here aborts on what the peer sends.
#ifndef TERN_DEPLOY_WAN_PROBE_H_
#define TERN_DEPLOY_WAN_PROBE_H_

#include <cstdint>
#include <memory>
#include <string>

namespace tern::wan {

// What the listener received: `bytes` in `seconds`, from the accept to the
// last byte read (to the end of the window when it had one).
struct ProbeResult {
  uint64_t bytes = 0;
  double seconds = 0;

  // Goodput in MB/s (1 MB = 10^6 bytes); 0 when no time passed.
  double MegabytesPerSecond() const;
};

// "goodput_mb_per_s=11.912 bytes=35736576 seconds=3.000", the line
// net_probe prints for scripts.
std::string FormatResult(const ProbeResult& result);

// The listener's answer on the wire, and its strict parser (the sender's
// view of a peer it does not trust): false and *error when `line` is not
// exactly "tern-probe bytes=<digits> micros=<digits>" with values in range.
std::string EncodeAnswer(const ProbeResult& result);
bool DecodeAnswer(const std::string& line, ProbeResult* result,
                  std::string* error);

// A bound, listening IPv4 TCP socket that serves one measurement at a time.
// Not thread-safe; the socket closes with the object.
class Listener {
 public:
  // Binds `address`:`port` (port 0: a free port). Null and *error on
  // failure (bad address, port in use, ...).
  static std::unique_ptr<Listener> Open(const std::string& address, int port,
                                        std::string* error);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The bound port (the chosen one when Open got 0).
  int port() const { return port_; }

  // Accepts one connection, counts what arrives for `seconds` after the
  // accept (0: until the sender closes its write side), answers, and drains
  // until the sender closes. Gives up when accept, a receive or the answer
  // sees no progress for `timeout_s`.
  bool ServeOne(double seconds, double timeout_s, ProbeResult* result,
                std::string* error);

 private:
  Listener(int fd, int port) : fd_(fd), port_(port) {}

  int fd_;
  int port_;
};

struct SendOptions {
  std::string address;
  int port = 0;
  // Exactly this many bytes, then close the write side (>= 0); or, when
  // negative, send for `seconds` or until the listener answers.
  int64_t bytes = -1;
  double seconds = 0;
  double timeout_s = 10;
};

// Connects to a listener (retrying refused or unreachable connects until
// `timeout_s` has passed: the listener may still be starting), sends, and
// returns the listener's answer. In bytes mode the answer must count exactly
// the bytes sent.
bool Send(const SendOptions& options, ProbeResult* result, std::string* error);

}  // namespace tern::wan

#endif  // TERN_DEPLOY_WAN_PROBE_H_

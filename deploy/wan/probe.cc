#include "deploy/wan/probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace tern::wan {
namespace {

using Clock = std::chrono::steady_clock;

// Reads and writes move this much at a time: large enough that a 1 Gbit/s
// loopback is not limited by system calls.
constexpr size_t kChunk = 256 * 1024;
// An answer longer than this is not one of ours.
constexpr size_t kMaxAnswer = 128;
constexpr char kAnswerPrefix[] = "tern-probe bytes=";
// Between connects refused because the listener is not up yet.
constexpr auto kConnectRetry = std::chrono::milliseconds(50);

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Waits up to `timeout_s` for `events` on `fd`. Returns the revents, 0 on
// timeout, -1 on a poll error (errno set). Retries EINTR with the time left.
int WaitFor(int fd, short events, double timeout_s) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s));
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    // Round up so that a wait of 0.3 ms is not a busy loop of 0 ms polls.
    const int ms = left.count() < 0 ? 0 : static_cast<int>(left.count()) + 1;
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, ms);
    if (rc > 0) return p.revents;
    if (rc == 0) {
      if (Clock::now() >= deadline) return 0;
      continue;  // woke up early: wait for the rest
    }
    if (errno != EINTR) return -1;
  }
}

bool ParseAddress(const std::string& address, int port, sockaddr_in* out,
                  std::string* error) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &out->sin_addr) != 1) {
    *error = "address '" + address + "' is not an IPv4 address";
    return false;
  }
  return true;
}

int NewSocket() {
  return socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

// Writes all of `data`, waiting up to `timeout_s` for each step of progress.
bool SendAll(int fd, const std::string& data, double timeout_s,
             std::string* error) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *error = Errno("sending the answer");
      return false;
    }
    const int ev = WaitFor(fd, POLLOUT, timeout_s);
    if (ev == 0) {
      *error = "the answer could not be sent for " + std::to_string(timeout_s) +
               " s";
      return false;
    }
    if (ev < 0) {
      *error = Errno("poll");
      return false;
    }
  }
  return true;
}

// One non-blocking connect, waited for up to `timeout_s`. Returns 0 when
// connected, else the errno of the failure (ETIMEDOUT when it took too long).
int ConnectOnce(int fd, const sockaddr_in& to, double timeout_s) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) {
    return 0;
  }
  if (errno != EINPROGRESS) return errno;
  const int ev = WaitFor(fd, POLLOUT, timeout_s);
  if (ev == 0) return ETIMEDOUT;
  if (ev < 0) return errno;
  int so_error = 0;
  socklen_t len = sizeof(so_error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) return errno;
  return so_error;
}

bool Connect(const SendOptions& options, Fd* fd, std::string* error) {
  sockaddr_in to;
  if (!ParseAddress(options.address, options.port, &to, error)) return false;
  const std::string where =
      options.address + ":" + std::to_string(options.port);
  const auto start = Clock::now();
  while (true) {
    fd->Reset(NewSocket());
    if (fd->get() < 0) {
      *error = Errno("socket");
      return false;
    }
    const double left = options.timeout_s - SecondsSince(start);
    const int err = ConnectOnce(fd->get(), to, std::max(left, 0.0));
    if (err == 0) return true;
    // The listener may not be listening yet, or its interface not up yet.
    const bool retry =
        err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH;
    if (!retry || SecondsSince(start) + 0.05 >= options.timeout_s) {
      *error = "could not connect to " + where + " within " +
               std::to_string(options.timeout_s) + " s: " + std::strerror(err);
      return false;
    }
    std::this_thread::sleep_for(kConnectRetry);
  }
}

// Parses a decimal uint64 that fills all of `text`.
bool ParseU64(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 19) return false;  // < 10^19 < 2^64
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// The sender's side of one probe connection while it sends and waits for
// the listener's answer.
struct SendState {
  const SendOptions& options;
  int fd;
  bool by_bytes;  // --bytes, not --seconds
  Clock::time_point start;
  uint64_t sent = 0;
  bool writing = true;
  std::string answer;
  bool answered = false;
};

// What one step of the send loop leaves the loop to do.
enum class Step {
  kFailed,   // return false (*error set)
  kAgain,    // go round the loop again
  kProceed,  // go on with the rest of this round
};

// Closes the write side once the bytes are sent or the time is up.
void StopWritingWhenDone(SendState* s) {
  if (!s->writing) return;
  const bool done = s->by_bytes
                        ? s->sent >= static_cast<uint64_t>(s->options.bytes)
                        : SecondsSince(s->start) >= s->options.seconds;
  if (done) {
    shutdown(s->fd, SHUT_WR);
    s->writing = false;
  }
}

// Polls for the answer (and, while writing, for room to send), no longer
// than the timeout, nor past the end of a --seconds sending time. Sets *ev
// to the events that arrived.
Step WaitForSocket(const SendState& s, int* ev, std::string* error) {
  short events = POLLIN;
  if (s.writing) events |= POLLOUT;
  double wait = s.options.timeout_s;
  if (s.writing && !s.by_bytes) {
    wait = std::min(
        wait, std::max(s.options.seconds - SecondsSince(s.start), 0.0) + 0.001);
  }
  *ev = WaitFor(s.fd, events, wait);
  if (*ev < 0) {
    *error = Errno("poll");
    return Step::kFailed;
  }
  if (*ev == 0) {
    if (wait < s.options.timeout_s) return Step::kAgain;  // sending time up
    *error =
        std::string("no progress for ") + std::to_string(s.options.timeout_s) +
        " s " +
        (s.writing ? "while sending" : "waiting for the listener's answer");
    return Step::kFailed;
  }
  return Step::kProceed;
}

// Reads what has arrived of the listener's answer line.
Step ReadAnswer(SendState* s, ProbeResult* result, std::string* error) {
  char buf[kMaxAnswer + 1];
  const ssize_t n = recv(s->fd, buf, sizeof(buf), 0);
  if (n > 0) {
    s->answer.append(buf, static_cast<size_t>(n));
    const size_t nl = s->answer.find('\n');
    if (nl != std::string::npos) {
      s->answer.resize(nl);
      s->answered = true;
    } else if (s->answer.size() > kMaxAnswer) {
      // Fails (too long), setting *error to the malformed answer.
      DecodeAnswer(s->answer, result, error);
      return Step::kFailed;
    }
    return Step::kAgain;
  }
  if (n == 0) {
    *error = "the listener closed the connection without an answer";
    return Step::kFailed;
  }
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    *error = Errno("receiving the answer");
    return Step::kFailed;
  }
  return Step::kProceed;
}

// Sends the next piece of zeros. A reset by the listener stops the writing
// only: its answer may still be waiting to be read.
bool WriteZeros(SendState* s, const std::vector<char>& zeros,
                std::string* error) {
  size_t size = zeros.size();
  if (s->by_bytes) {
    size = static_cast<size_t>(std::min<uint64_t>(
        size, static_cast<uint64_t>(s->options.bytes) - s->sent));
  }
  const ssize_t n = send(s->fd, zeros.data(), size, MSG_NOSIGNAL);
  if (n > 0) {
    s->sent += static_cast<uint64_t>(n);
  } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
    s->writing = false;  // an answer may still be waiting to be read
  } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
             errno != EINTR) {
    *error = Errno("sending");
    return false;
  }
  return true;
}

// Decodes the answer and checks the listener's count against what was sent.
bool FinishSend(const SendState& s, ProbeResult* result, std::string* error) {
  if (!DecodeAnswer(s.answer, result, error)) return false;
  // Drop whatever is still buffered instead of making the listener drain it.
  const linger reset{1, 0};
  setsockopt(s.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  if (s.by_bytes && result->bytes != static_cast<uint64_t>(s.options.bytes)) {
    *error = "the listener counted " + std::to_string(result->bytes) +
             " of the " + std::to_string(s.options.bytes) + " bytes sent";
    return false;
  }
  if (result->bytes > s.sent) {
    *error = "the listener counted " + std::to_string(result->bytes) +
             " bytes but only " + std::to_string(s.sent) + " were sent";
    return false;
  }
  return true;
}

}  // namespace

double ProbeResult::MegabytesPerSecond() const {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / seconds / 1e6;
}

std::string FormatResult(const ProbeResult& result) {
  char line[128];
  std::snprintf(line, sizeof(line),
                "goodput_mb_per_s=%.3f bytes=%" PRIu64 " seconds=%.3f",
                result.MegabytesPerSecond(), result.bytes, result.seconds);
  return line;
}

std::string EncodeAnswer(const ProbeResult& result) {
  const auto micros = static_cast<uint64_t>(result.seconds * 1e6 + 0.5);
  return kAnswerPrefix + std::to_string(result.bytes) +
         " micros=" + std::to_string(micros) + "\n";
}

bool DecodeAnswer(const std::string& line, ProbeResult* result,
                  std::string* error) {
  const std::string prefix = kAnswerPrefix;
  const std::string bad = "malformed answer from the listener: '" +
                          line.substr(0, kMaxAnswer) + "'";
  if (line.size() > kMaxAnswer || line.compare(0, prefix.size(), prefix)) {
    *error = bad;
    return false;
  }
  const size_t space = line.find(" micros=", prefix.size());
  if (space == std::string::npos) {
    *error = bad;
    return false;
  }
  uint64_t bytes = 0;
  uint64_t micros = 0;
  if (!ParseU64(line.substr(prefix.size(), space - prefix.size()), &bytes) ||
      !ParseU64(line.substr(space + 8), &micros)) {
    *error = bad;
    return false;
  }
  result->bytes = bytes;
  result->seconds = static_cast<double>(micros) / 1e6;
  return true;
}

std::unique_ptr<Listener> Listener::Open(const std::string& address, int port,
                                         std::string* error) {
  sockaddr_in at;
  if (!ParseAddress(address, port, &at, error)) return nullptr;
  Fd fd(NewSocket());
  if (fd.get() < 0) {
    *error = Errno("socket");
    return nullptr;
  }
  // A check run right after another must not fail on TIME_WAIT.
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&at), sizeof(at)) != 0) {
    *error = Errno("bind " + address + ":" + std::to_string(port));
    return nullptr;
  }
  if (listen(fd.get(), 4) != 0) {
    *error = Errno("listen");
    return nullptr;
  }
  socklen_t len = sizeof(at);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    *error = Errno("getsockname");
    return nullptr;
  }
  return std::unique_ptr<Listener>(
      new Listener(fd.Release(), ntohs(at.sin_port)));
}

Listener::~Listener() { close(fd_); }

bool Listener::ServeOne(double seconds, double timeout_s, ProbeResult* result,
                        std::string* error) {
  const int ev = WaitFor(fd_, POLLIN, timeout_s);
  if (ev == 0) {
    *error = "no connection within " + std::to_string(timeout_s) + " s";
    return false;
  }
  if (ev < 0) {
    *error = Errno("poll");
    return false;
  }
  Fd conn(accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (conn.get() < 0) {
    *error = Errno("accept");
    return false;
  }
  const auto start = Clock::now();
  std::vector<char> buffer(kChunk);
  uint64_t bytes = 0;
  // Seconds from the accept to the last byte, or to the end of the window.
  double measured = 0;
  while (true) {
    double wait = timeout_s;
    if (seconds > 0) {
      const double elapsed = SecondsSince(start);
      if (elapsed >= seconds) {
        measured = elapsed;  // the link was busy for the whole window
        break;
      }
      wait = std::min(wait, seconds - elapsed);
    }
    const ssize_t n = recv(conn.get(), buffer.data(), buffer.size(), 0);
    if (n > 0) {
      bytes += static_cast<uint64_t>(n);
      measured = SecondsSince(start);
      continue;
    }
    if (n == 0) break;  // the sender closed its write side
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *error = Errno("receiving");
      return false;
    }
    const int ready = WaitFor(conn.get(), POLLIN, wait);
    if (ready < 0) {
      *error = Errno("poll");
      return false;
    }
    if (ready == 0 && wait == timeout_s) {
      *error = "no data for " + std::to_string(timeout_s) + " s";
      return false;
    }
  }
  result->bytes = bytes;
  result->seconds = measured;
  if (!SendAll(conn.get(), EncodeAnswer(*result), timeout_s, error)) {
    return false;
  }
  shutdown(conn.get(), SHUT_WR);
  // Drain until the sender resets or closes, so that closing here with
  // unread data does not reset the connection before the answer arrives.
  // The measurement is done: running out of time here is not an error.
  const auto drain_start = Clock::now();
  while (SecondsSince(drain_start) < timeout_s) {
    const ssize_t n = recv(conn.get(), buffer.data(), buffer.size(), 0);
    if (n > 0) continue;
    if (n == 0) break;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    if (WaitFor(conn.get(), POLLIN, timeout_s - SecondsSince(drain_start)) <=
        0) {
      break;
    }
  }
  return true;
}

bool Send(const SendOptions& options, ProbeResult* result, std::string* error) {
  Fd fd;
  if (!Connect(options, &fd, error)) return false;
  const std::vector<char> zeros(kChunk, 0);
  SendState s{options, fd.get(), options.bytes >= 0, Clock::now()};
  while (!s.answered) {
    StopWritingWhenDone(&s);
    int ev = 0;
    const Step waited = WaitForSocket(s, &ev, error);
    if (waited == Step::kFailed) return false;
    if (waited == Step::kAgain) continue;
    if (ev & (POLLIN | POLLHUP | POLLERR)) {
      const Step read = ReadAnswer(&s, result, error);
      if (read == Step::kFailed) return false;
      if (read == Step::kAgain) continue;
    }
    if (s.writing && (ev & POLLOUT) && !WriteZeros(&s, zeros, error)) {
      return false;
    }
  }
  return FinishSend(s, result, error);
}

}  // namespace tern::wan

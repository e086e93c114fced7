#include "common/process/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tern::process {
namespace {

// The pipe's write end, for the handler. A signal handler can reach no
// object, so this one descriptor is process-wide state; -1 when no
// watcher is alive.
std::atomic<int> g_write_fd{-1};

// The byte that tells the watcher's thread to end (no signal is 0).
constexpr char kQuit = 0;

// Our own invariants (DESIGN: CHECK only guards those); nothing from
// outside the process reaches these.
void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "SignalWatcher: %s (%s)\n", what, strerror(errno));
  std::abort();
}

void OnSignal(int signal) {
  const int saved_errno = errno;
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const char byte = static_cast<char>(signal);
    // Non-blocking: a full pipe already holds a pending stop.
    [[maybe_unused]] ssize_t written = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

SignalWatcher::SignalWatcher(StopRequest* stop) : stop_(stop) {
  int fds[2];
  Require(pipe2(fds, O_CLOEXEC) == 0, "pipe2 failed");
  Require(fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0, "fcntl failed");
  read_fd_ = fds[0];
  int expected = -1;
  Require(g_write_fd.compare_exchange_strong(expected, fds[1]),
          "only one SignalWatcher may be alive in a process");

  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
  thread_ = std::thread([this] { Watch(); });
}

void SignalWatcher::Watch() {
  for (;;) {
    char byte;
    const ssize_t got = read(read_fd_, &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || byte == kQuit) return;
    stop_->Request(absl::StrCat(strsignal(byte), " received"));
  }
}

SignalWatcher::~SignalWatcher() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  const int write_fd = g_write_fd.exchange(-1);
  const char quit = kQuit;
  // The watcher's thread reads every byte before this one, so a signal
  // that arrived before the handlers were restored still requests stop.
  while (write(write_fd, &quit, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(write_fd);
  close(read_fd_);
}

}  // namespace tern::process

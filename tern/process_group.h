// The children of `tern launch`: start processes with their output on pipes,
// turn the output into lines, notice exits and Ctrl-C/SIGTERM, and stop
// everything with SIGTERM, a grace period, then SIGKILL.
//
// Children are tied to this process: each runs in its own process group (a
// Ctrl-C on the terminal reaches only `tern launch`, which then stops them in
// order) and with PR_SET_PDEATHSIG = SIGKILL, so none outlives a launcher
// that is killed outright.
#ifndef TERN_TERN_PROCESS_GROUP_H_
#define TERN_TERN_PROCESS_GROUP_H_

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tern {

// Splits a byte stream into lines ("\n" ends a line; a "\r" before it is
// dropped). A line longer than `max_line` bytes is cut there, so a child that
// never writes a newline cannot make the reader hold unbounded memory.
class LineBuffer {
 public:
  explicit LineBuffer(size_t max_line = 64 * 1024) : max_line_(max_line) {}

  // Appends bytes; returns the lines they complete, without terminators.
  std::vector<std::string> Append(absl::string_view bytes);
  // At end of stream: the unfinished last line, if any.
  std::optional<std::string> Flush();

 private:
  size_t max_line_;
  std::string partial_;
};

// How a child ended, from its wait status.
struct ChildExit {
  int wait_status = 0;

  bool signaled() const;
  // The exit code, or the signal number when signaled().
  int code_or_signal() const;
  bool success() const { return !signaled() && code_or_signal() == 0; }
  // "exit code 1", "killed by signal 9 (Killed)".
  std::string Describe() const;
};

struct ChildSpec {
  // Names the child on every line of its output and in messages ("ps/0").
  std::string name;
  // Executable to run and its full argv (argv[0] included).
  std::string path;
  std::vector<std::string> argv;
  // Environment variables the child must not inherit.
  std::vector<std::string> unset_env;
  // File that receives the child's output lines (stdout and stderr merged);
  // empty for none. Created or truncated.
  std::string log_path;
};

// Owns the children it spawns and the descriptors that watch them. Not
// thread-safe: one thread (the one that created it) calls everything.
class ProcessGroup {
 public:
  // Receives each output line of a child as it completes.
  using LineSink =
      std::function<void(const std::string& child, absl::string_view line)>;

  // Blocks SIGINT, SIGTERM and SIGCHLD in the calling thread and reads them
  // from a signalfd instead (SIGINT and SIGTERM are un-ignored first: a shell
  // starts background jobs with SIGINT ignored). Create it before any other
  // thread starts. `keep_lines` is how many last lines of each child are
  // kept for failure reports.
  static absl::StatusOr<std::unique_ptr<ProcessGroup>> Create(
      LineSink sink, size_t keep_lines = 20);

  // SIGKILLs the children still running, reaps them, and restores the
  // signal mask and dispositions.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Starts a child; returns its index. INTERNAL (with the system's reason)
  // when pipes, the log file or fork fail. If exec fails, the child prints
  // why and exits with code 127.
  absl::StatusOr<size_t> Spawn(const ChildSpec& spec);

  // Waits up to `timeout` for output, exits or signals, and handles what
  // arrived: lines go to the sink and the log, exits are recorded, SIGINT /
  // SIGTERM set interrupt_signal().
  void Poll(absl::Duration timeout);

  // Indices of the children that exited since the last call, in the order
  // their exits were seen.
  std::vector<size_t> TakeExited();

  // Sends `signal` to child i's process group, if it is still running.
  void Signal(size_t i, int signal);

  // Stops the given children: SIGTERM, then up to `grace` for them to exit
  // (output keeps flowing), then SIGKILL for the rest; returns once all are
  // reaped. A second Ctrl-C/SIGTERM during the grace period SIGKILLs at once.
  void Stop(const std::vector<size_t>& children, absl::Duration grace);
  void StopAll(absl::Duration grace);

  // The first SIGINT or SIGTERM this process received (0: none).
  int interrupt_signal() const { return interrupt_signal_; }
  size_t size() const { return children_.size(); }
  const std::string& name(size_t i) const { return children_[i].name; }
  bool running(size_t i) const { return !children_[i].exit.has_value(); }
  const std::optional<ChildExit>& exit(size_t i) const {
    return children_[i].exit;
  }
  // The child's last `keep_lines` output lines, oldest first.
  std::vector<std::string> LastLines(size_t i) const;

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    int output_fd = -1;  // read end of the stdout/stderr pipe; owned
    int log_fd = -1;     // owned
    LineBuffer lines;
    std::deque<std::string> last_lines;
    std::optional<ChildExit> exit;
  };

  ProcessGroup(LineSink sink, size_t keep_lines, int signal_fd,
               const sigset_t& old_mask, struct sigaction old_int,
               struct sigaction old_term);

  void HandleLine(Child& child, std::string line);
  // Reads what child's pipe holds now; closes it at end of stream.
  void Drain(Child& child);
  void ReadSignals();
  void Reap();

  LineSink sink_;
  size_t keep_lines_;
  int signal_fd_;  // owned
  sigset_t old_mask_;
  struct sigaction old_int_;
  struct sigaction old_term_;
  int interrupt_signal_ = 0;
  int interrupts_ = 0;
  std::vector<Child> children_;
  std::vector<size_t> exited_;
};

}  // namespace tern

#endif  // TERN_TERN_PROCESS_GROUP_H_

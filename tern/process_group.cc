#include "tern/process_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace tern {
namespace {

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a full disk must not stop the job: the pipe keeps flowing
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Owns the char* arrays that execve needs, built before fork (the child may
// only make async-signal-safe calls, so no allocation after fork).
class CStringArray {
 public:
  explicit CStringArray(std::vector<std::string> strings)
      : strings_(std::move(strings)) {
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  char* const* get() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// What the child of a fork needs to become the command, all made before
// the fork.
struct ExecPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  pid_t parent;          // the launcher, to notice that it already died
  int stdin_fd;          // /dev/null, or < 0 to keep the launcher's
  int output_fd;         // the pipe's write end: stdout and stderr
  const sigset_t* mask;  // the signal mask the launcher had before its own
};

// The child's side of the fork: its own process group, killed with the
// launcher, default signal handling, then execve. Async-signal-safe calls
// only (the parent may hold locks the child would wait on forever).
[[noreturn]] void ExecChild(const ExecPlan& plan) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != plan.parent) ::_exit(129);  // the launcher already died
  if (plan.stdin_fd >= 0) ::dup2(plan.stdin_fd, STDIN_FILENO);
  ::dup2(plan.output_fd, STDOUT_FILENO);
  ::dup2(plan.output_fd, STDERR_FILENO);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(SIGINT, &default_action, nullptr);
  ::sigaction(SIGTERM, &default_action, nullptr);
  ::sigaction(SIGPIPE, &default_action, nullptr);
  ::pthread_sigmask(SIG_SETMASK, plan.mask, nullptr);
  ::execve(plan.path, plan.argv, plan.envp);
  static const char kMessage[] = "tern launch: exec failed\n";
  ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  ::_exit(127);
}

std::vector<std::string> EnvironmentWithout(
    const std::vector<std::string>& names) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    absl::string_view var(*entry);
    const absl::string_view name = var.substr(0, var.find('='));
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      env.emplace_back(var);
    }
  }
  return env;
}

}  // namespace

std::vector<std::string> LineBuffer::Append(absl::string_view bytes) {
  std::vector<std::string> lines;
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    const size_t take =
        newline == absl::string_view::npos ? bytes.size() : newline;
    const size_t room = max_line_ - partial_.size();
    if (take >= room) {
      // The line is too long (or exactly fills the buffer): cut it here.
      partial_.append(bytes.data(), room);
      bytes.remove_prefix(room);
      if (!bytes.empty() && bytes.front() == '\n') bytes.remove_prefix(1);
      lines.push_back(std::move(partial_));
      partial_.clear();
      continue;
    }
    partial_.append(bytes.data(), take);
    if (newline == absl::string_view::npos) break;
    bytes.remove_prefix(newline + 1);
    if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
    lines.push_back(std::move(partial_));
    partial_.clear();
  }
  return lines;
}

std::optional<std::string> LineBuffer::Flush() {
  if (partial_.empty()) return std::nullopt;
  std::string line = std::move(partial_);
  partial_.clear();
  if (line.back() == '\r') line.pop_back();
  return line;
}

bool ChildExit::signaled() const { return WIFSIGNALED(wait_status); }

int ChildExit::code_or_signal() const {
  return signaled() ? WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
}

std::string ChildExit::Describe() const {
  if (signaled()) {
    return absl::StrCat("killed by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ")");
  }
  return absl::StrCat("exit code ", WEXITSTATUS(wait_status));
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Create(
    LineSink sink, size_t keep_lines) {
  struct sigaction old_int {};
  struct sigaction old_term {};
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  // An ignored signal is discarded even while blocked, so a launcher started
  // in the background by a shell (SIGINT ignored) would never see it.
  if (sigaction(SIGINT, nullptr, &old_int) != 0 ||
      sigaction(SIGTERM, nullptr, &old_term) != 0) {
    return ErrnoError("sigaction");
  }
  if (old_int.sa_handler == SIG_IGN) {
    sigaction(SIGINT, &default_action, nullptr);
  }
  if (old_term.sa_handler == SIG_IGN) {
    sigaction(SIGTERM, &default_action, nullptr);
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGCHLD);
  sigset_t old_mask;
  if (const int error = pthread_sigmask(SIG_BLOCK, &mask, &old_mask);
      error != 0) {
    errno = error;
    return ErrnoError("pthread_sigmask");
  }
  const int signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) {
    absl::Status status = ErrnoError("signalfd");
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return status;
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(
      std::move(sink), keep_lines, signal_fd, old_mask, old_int, old_term));
}

ProcessGroup::ProcessGroup(LineSink sink, size_t keep_lines, int signal_fd,
                           const sigset_t& old_mask, struct sigaction old_int,
                           struct sigaction old_term)
    : sink_(std::move(sink)),
      keep_lines_(keep_lines),
      signal_fd_(signal_fd),
      old_mask_(old_mask),
      old_int_(old_int),
      old_term_(old_term) {}

ProcessGroup::~ProcessGroup() {
  for (size_t i = 0; i < children_.size(); ++i) Signal(i, SIGKILL);
  for (Child& child : children_) {
    if (!child.exit.has_value()) {
      int status = 0;
      while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (child.output_fd >= 0) ::close(child.output_fd);
    if (child.log_fd >= 0) ::close(child.log_fd);
  }
  ::close(signal_fd_);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

absl::StatusOr<size_t> ProcessGroup::Spawn(const ChildSpec& spec) {
  Child child;
  child.name = spec.name;
  child.lines = LineBuffer();
  if (!spec.log_path.empty()) {
    child.log_fd = ::open(spec.log_path.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (child.log_fd < 0) {
      return ErrnoError(absl::StrCat("cannot create ", spec.log_path));
    }
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    absl::Status status = ErrnoError("pipe2");
    if (child.log_fd >= 0) ::close(child.log_fd);
    return status;
  }
  const int dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

  CStringArray argv(spec.argv);
  CStringArray envp(EnvironmentWithout(spec.unset_env));
  const std::string path = spec.path;
  const pid_t parent = ::getpid();
  const sigset_t child_mask = old_mask_;

  const pid_t pid = ::fork();
  if (pid < 0) {
    absl::Status status = ErrnoError("fork");
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (dev_null >= 0) ::close(dev_null);
    if (child.log_fd >= 0) ::close(child.log_fd);
    return status;
  }
  if (pid == 0) {
    ExecChild({path.c_str(), argv.get(), envp.get(), parent, dev_null,
               pipe_fds[1], &child_mask});
  }
  // Also from this side, so that Signal() reaches the group even if the
  // child has not run yet.
  ::setpgid(pid, pid);
  ::close(pipe_fds[1]);
  if (dev_null >= 0) ::close(dev_null);
  ::fcntl(pipe_fds[0], F_SETFL, ::fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
  child.pid = pid;
  child.output_fd = pipe_fds[0];
  children_.push_back(std::move(child));
  return children_.size() - 1;
}

void ProcessGroup::HandleLine(Child& child, std::string line) {
  if (child.log_fd >= 0) WriteAll(child.log_fd, absl::StrCat(line, "\n"));
  if (sink_) sink_(child.name, line);
  child.last_lines.push_back(std::move(line));
  while (child.last_lines.size() > keep_lines_) child.last_lines.pop_front();
}

void ProcessGroup::Drain(Child& child) {
  char buffer[64 * 1024];
  // Bounded, so one chatty child cannot starve the others.
  for (int round = 0; round < 16 && child.output_fd >= 0; ++round) {
    const ssize_t n = ::read(child.output_fd, buffer, sizeof(buffer));
    if (n > 0) {
      for (std::string& line :
           child.lines.Append(absl::string_view(buffer, n))) {
        HandleLine(child, std::move(line));
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of stream (or an error that ends it).
    if (std::optional<std::string> last = child.lines.Flush()) {
      HandleLine(child, std::move(*last));
    }
    ::close(child.output_fd);
    child.output_fd = -1;
  }
}

void ProcessGroup::ReadSignals() {
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    if (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM) {
      if (interrupt_signal_ == 0) interrupt_signal_ = info.ssi_signo;
      ++interrupts_;
    }
    // SIGCHLD only wakes the poll; Reap() looks at every child.
  }
}

void ProcessGroup::Reap() {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& child = children_[i];
    if (child.exit.has_value()) continue;
    int status = 0;
    const pid_t pid = ::waitpid(child.pid, &status, WNOHANG);
    if (pid != child.pid) continue;
    // Everything the child wrote is in the pipe now; read it before the
    // exit is reported, so a failure report shows the last lines.
    Drain(child);
    child.exit = ChildExit{status};
    exited_.push_back(i);
  }
}

void ProcessGroup::Poll(absl::Duration timeout) {
  std::vector<pollfd> fds;
  std::vector<size_t> owners;
  fds.push_back({signal_fd_, POLLIN, 0});
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].output_fd >= 0) {
      fds.push_back({children_[i].output_fd, POLLIN, 0});
      owners.push_back(i);
    }
  }
  const int timeout_ms = static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout)));
  const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
  if (ready > 0) {
    for (size_t f = 1; f < fds.size(); ++f) {
      if (fds[f].revents != 0) Drain(children_[owners[f - 1]]);
    }
    if (fds[0].revents != 0) ReadSignals();
  }
  Reap();
}

std::vector<size_t> ProcessGroup::TakeExited() {
  std::vector<size_t> exited;
  exited.swap(exited_);
  return exited;
}

void ProcessGroup::Signal(size_t i, int signal) {
  const Child& child = children_[i];
  // An exited child's pid may belong to someone else by now.
  if (child.exit.has_value() || child.pid <= 0) return;
  ::kill(-child.pid, signal);
}

void ProcessGroup::Stop(const std::vector<size_t>& children,
                        absl::Duration grace) {
  for (size_t i : children) Signal(i, SIGTERM);
  const int interrupts_before = interrupts_;
  const absl::Time deadline = absl::Now() + grace;
  auto all_exited = [&] {
    return std::none_of(children.begin(), children.end(),
                        [&](size_t i) { return running(i); });
  };
  while (!all_exited() && absl::Now() < deadline &&
         interrupts_ == interrupts_before) {
    Poll(std::min(absl::Milliseconds(100), deadline - absl::Now()));
  }
  for (size_t i : children) Signal(i, SIGKILL);
  // SIGKILL cannot be refused, so this wait ends; the bound guards against
  // a child stuck in the kernel (D state).
  const absl::Time kill_deadline = absl::Now() + absl::Seconds(10);
  while (!all_exited() && absl::Now() < kill_deadline) {
    Poll(absl::Milliseconds(50));
  }
}

void ProcessGroup::StopAll(absl::Duration grace) {
  std::vector<size_t> all(children_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  Stop(all, grace);
}

std::vector<std::string> ProcessGroup::LastLines(size_t i) const {
  return std::vector<std::string>(children_[i].last_lines.begin(),
                                  children_[i].last_lines.end());
}

}  // namespace tern

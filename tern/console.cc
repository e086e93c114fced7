#include "tern/console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tern {
namespace {

int TerminalWidth() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 80;
}

}  // namespace

void Console::ChildLine(absl::string_view child, absl::string_view line) {
  Write(absl::StrCat("[", child, "] ", line, "\n"));
}

void Console::Note(absl::string_view text) {
  Write(absl::StrCat("[launch] ", text, "\n"));
}

void Console::Progress(const ProgressSnapshot& snapshot) {
  const absl::Time now = absl::Now();
  if (terminal_) {
    bar_ = FormatProgressBar(snapshot, TerminalWidth() - 1);
    // Redraws are throttled (a terminal is slow, and steps can be fast)
    // and skipped when nothing changed.
    if (bar_ != drawn_ && now - last_draw_ >= absl::Milliseconds(100)) {
      Emit(absl::StrCat("\r\x1b[K", bar_));
      drawn_ = bar_;
      last_draw_ = now;
    }
  } else if (plain_every_ > absl::ZeroDuration() &&
             now - last_draw_ >= plain_every_) {
    Emit(absl::StrCat("[launch] ", FormatProgressLine(snapshot), "\n"));
    last_draw_ = now;
  }
}

void Console::EndProgress() {
  if (terminal_ && !bar_.empty()) Emit("\r\x1b[K");
  bar_.clear();
}

void Console::Write(absl::string_view text) {
  if (terminal_ && !bar_.empty()) {
    Emit(absl::StrCat("\r\x1b[K", text, bar_));
    drawn_ = bar_;
  } else {
    Emit(text);
  }
}

void Console::Emit(absl::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tern

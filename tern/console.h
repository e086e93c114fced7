// Everything `tern launch` writes to stderr: the children's lines with their
// prefix, its own notes, and the training progress, which is a bar redrawn
// on the last line of a terminal (cleared before each other line) or a
// periodic plain line otherwise (tern/progress.h formats both).
#ifndef TERN_TERN_CONSOLE_H_
#define TERN_TERN_CONSOLE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tern/progress.h"

namespace tern {

// Not thread-safe: the launcher's main thread owns it (ProcessGroup calls
// its line callback from Poll, on that same thread).
class Console {
 public:
  // `terminal`: stderr is a terminal (draw a bar); otherwise a plain
  // progress line at most every `plain_every` (zero: none).
  Console(bool terminal, absl::Duration plain_every)
      : terminal_(terminal), plain_every_(plain_every) {}

  // "[worker/1] <line>".
  void ChildLine(absl::string_view child, absl::string_view line);
  // "[launch] <text>".
  void Note(absl::string_view text);
  // Redraws the bar (throttled, skipped when unchanged) or prints a plain
  // line when one is due.
  void Progress(const ProgressSnapshot& snapshot);
  // Removes the bar for good (before the summary).
  void EndProgress();

 private:
  void Write(absl::string_view text);
  static void Emit(absl::string_view text);

  bool terminal_;
  absl::Duration plain_every_;
  std::string bar_;    // the current bar; empty: none shown
  std::string drawn_;  // the bar last drawn by Progress()
  absl::Time last_draw_ = absl::InfinitePast();
};

}  // namespace tern

#endif  // TERN_TERN_CONSOLE_H_

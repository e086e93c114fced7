#include "tern/progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tern {

void ProgressTracker::Add(const MetricsRecord& record) {
  recent_.push_back(record);
  while (recent_.size() > window_) recent_.pop_front();
  if (record.test_accuracy.has_value()) test_accuracy_ = record.test_accuracy;
}

ProgressSnapshot ProgressTracker::Snapshot() const {
  ProgressSnapshot snapshot;
  snapshot.total_steps = total_steps_;
  snapshot.test_accuracy = test_accuracy_;
  if (recent_.empty()) return snapshot;
  const MetricsRecord& first = recent_.front();
  const MetricsRecord& last = recent_.back();
  snapshot.steps_done = last.step + 1;
  double loss_sum = 0;
  int finite_losses = 0;
  for (const MetricsRecord& record : recent_) {
    if (std::isfinite(record.loss)) {
      loss_sum += record.loss;
      ++finite_losses;
    }
  }
  if (finite_losses > 0) snapshot.loss = loss_sum / finite_losses;
  const double seconds = last.wall_s - first.wall_s;
  if (last.step > first.step && seconds > 0) {
    snapshot.steps_per_s = static_cast<double>(last.step - first.step) / seconds;
    const uint64_t left = total_steps_ > snapshot.steps_done
                              ? total_steps_ - snapshot.steps_done
                              : 0;
    snapshot.eta_s = static_cast<double>(left) / snapshot.steps_per_s;
  }
  return snapshot;
}

std::string FormatDuration(std::optional<double> seconds) {
  // Beyond 100 days the estimate means nothing.
  if (!seconds.has_value() || !std::isfinite(*seconds) || *seconds < 0 ||
      *seconds > 100 * 86400.0) {
    return "--:--";
  }
  const int64_t total = static_cast<int64_t>(std::llround(*seconds));
  const int64_t hours = total / 3600;
  const int64_t minutes = (total / 60) % 60;
  const int64_t secs = total % 60;
  if (hours > 0) return absl::StrFormat("%d:%02d:%02d", hours, minutes, secs);
  return absl::StrFormat("%d:%02d", minutes, secs);
}

namespace {

// The text after the bar, shared by both forms.
std::string Details(const ProgressSnapshot& s, absl::string_view separator,
                    absl::string_view accuracy_label) {
  std::string text = absl::StrFormat("%.2f steps/s", s.steps_per_s);
  if (s.loss.has_value()) {
    absl::StrAppendFormat(&text, "%sloss %.4f", separator, *s.loss);
  }
  if (s.test_accuracy.has_value()) {
    absl::StrAppendFormat(&text, "%s%s %.1f%%", separator, accuracy_label,
                          100 * *s.test_accuracy);
  }
  absl::StrAppend(&text, separator, "ETA ", FormatDuration(s.eta_s));
  return text;
}

}  // namespace

std::string FormatProgressBar(const ProgressSnapshot& s, int width) {
  const std::string counts = absl::StrCat(s.steps_done, "/", s.total_steps);
  const std::string text =
      absl::StrCat("  ", counts, "  ", Details(s, "  ", "acc"));
  const int bar = width - 2 - static_cast<int>(text.size());
  if (bar < 10) return text.substr(0, std::max(0, width));
  const double fraction =
      s.total_steps == 0
          ? 0
          : std::min(1.0, static_cast<double>(s.steps_done) / s.total_steps);
  const int filled = static_cast<int>(fraction * bar);
  return absl::StrCat("[", std::string(filled, '#'),
                      std::string(bar - filled, '.'), "]", text);
}

std::string FormatProgressLine(const ProgressSnapshot& s) {
  const int percent =
      s.total_steps == 0
          ? 0
          : static_cast<int>(100.0 * s.steps_done / s.total_steps);
  return absl::StrCat("step ", s.steps_done, "/", s.total_steps, " (", percent,
                      "%), ", Details(s, ", ", "test accuracy"));
}

}  // namespace tern

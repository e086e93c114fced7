// The progress display of `tern launch` (DESIGN section 8): a bar redrawn in
// place on a terminal, a plain line now and then otherwise. It follows worker
// 0's records; synchronous steps make it representative of every worker.
#ifndef TERN_TERN_PROGRESS_H_
#define TERN_TERN_PROGRESS_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "tern/metrics_file.h"

namespace tern {

// The state worth showing, from the records seen so far.
struct ProgressSnapshot {
  uint64_t steps_done = 0;  // last step + 1
  uint64_t total_steps = 0;
  double steps_per_s = 0;   // over the recent window; 0 until two records
  std::optional<double> loss;           // mean over the recent window
  std::optional<double> test_accuracy;  // latest evaluation
  // Seconds left at the current rate; unset while the rate is unknown.
  std::optional<double> eta_s;
};

class ProgressTracker {
 public:
  // `window`: how many recent records the rate and the loss average over.
  explicit ProgressTracker(uint64_t total_steps, size_t window = 20)
      : total_steps_(total_steps), window_(window < 2 ? 2 : window) {}

  void Add(const MetricsRecord& record);
  ProgressSnapshot Snapshot() const;
  bool empty() const { return recent_.empty(); }

 private:
  uint64_t total_steps_;
  size_t window_;
  std::deque<MetricsRecord> recent_;
  std::optional<double> test_accuracy_;
};

// 65 -> "1:05", 3723 -> "1:02:03"; "--:--" for an unknown or absurd time.
std::string FormatDuration(std::optional<double> seconds);

// "[########......]  20/40  3.10 steps/s  loss 1.2345  acc 91.2%  ETA 0:06",
// at most `width` columns (the bar takes what the text leaves).
std::string FormatProgressBar(const ProgressSnapshot& snapshot, int width);

// "step 20/40 (50%), 3.10 steps/s, loss 1.2345, test accuracy 91.2%, ETA
// 0:06": one line for a log.
std::string FormatProgressLine(const ProgressSnapshot& snapshot);

}  // namespace tern

#endif  // TERN_TERN_PROGRESS_H_

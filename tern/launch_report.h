// The end of `tern launch`: what the workers' records and the servers'
// reports say (tern/run_summary.h, tern/geo_report.h), the last checks a run
// must pass (identical replicas, or agreeing LPSs), OUT/summary.json and the
// printed summary.
#ifndef TERN_TERN_LAUNCH_REPORT_H_
#define TERN_TERN_LAUNCH_REPORT_H_

#include "absl/time/time.h"
#include "tern/launch_context.h"
#include "tern/run_summary.h"

namespace tern {

// When the job ran: from the first child's start (after the emulated WAN)
// until the last worker ended.
struct JobTimes {
  absl::Time launch_start;  // RunLaunch's start: the summary's wall_s
  absl::Time job_start;
  absl::Time job_end;
};

// Reads every worker's records and the servers' reports under the run's
// output directory and fills the report's measured parts.
RunReport MeasureRun(const LaunchContext& run, const JobTimes& times,
                     TrainingSummary* training);

// A run whose children all succeeded still fails when its replicas are not
// proven identical (plain and baseline/terngrad runs: the workers'
// checksums) or its data centers end on different models (gaia/weightgrad:
// the LPSs' checksums, when every LPS reported one).
void CheckReplicas(const LaunchContext& run, const TrainingSummary& training,
                   const RunReport& report);

// Fills the outcome's children and wall time, writes OUT/summary.json
// (a warning on the console when it cannot), prints the summary on stdout,
// and returns the run's exit code.
int FinishRun(const LaunchContext& run, const JobTimes& times);

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_REPORT_H_

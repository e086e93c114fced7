// `tern launch --metrics_listen=IP:BASE_PORT`: every server and worker it
// starts serves its Prometheus metrics on a port of its own, BASE_PORT,
// BASE_PORT + 1, ... in the order they start (servers first, then workers),
// and OUT/prometheus.yml is a Prometheus config that scrapes them all,
// each labelled with its child's name (process="ps/0", "worker/3", ...):
//
//   prometheus --config.file=OUT/prometheus.yml
//
// Not thread-safe: the launcher's main thread calls it (ChildSupervisor).
#ifndef TERN_TERN_LAUNCH_METRICS_H_
#define TERN_TERN_LAUNCH_METRICS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/metrics/metrics_options.h"

namespace tern {

// INVALID_ARGUMENT naming the flag when `metrics` is set but is not
// IP:PORT with a port from 1 up (ValidateMetricsOptions; port 0 would
// leave the scrape config without addresses), or when `children` ports
// from it would pass 65535.
absl::Status ValidateLaunchMetrics(const metrics::MetricsOptions& metrics,
                                   uint32_t children);

class LaunchMetrics {
 public:
  // `metrics`: launch's --metrics_listen (empty: off) and
  // --metrics_linger_s; `config_path`: where the scrape config goes.
  LaunchMetrics(metrics::MetricsOptions metrics, std::string config_path);

  bool enabled() const { return !metrics_.listen.empty(); }

  // The flags that give child `name` the next port (--metrics_listen,
  // --metrics_linger_s); none when off.
  std::vector<std::string> ArgsFor(const std::string& name);

  // Writes the scrape config of every child given a port so far (written
  // again after each child, so it is complete once all have started).
  absl::Status WriteScrapeConfig() const;

  // The scrape config's text.
  std::string ScrapeConfig() const;

 private:
  const metrics::MetricsOptions metrics_;
  const std::string config_path_;
  // (child name, address Prometheus scrapes).
  std::vector<std::pair<std::string, std::string>> targets_;
};

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_METRICS_H_

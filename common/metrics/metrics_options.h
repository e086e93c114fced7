// What --metrics_listen and --metrics_linger_s say (common/metrics/
// metrics_flags.h registers them on every role): whether a role serves
// its Prometheus metrics, where, and how long it stays up after its work.
#ifndef TERN_COMMON_METRICS_METRICS_OPTIONS_H_
#define TERN_COMMON_METRICS_METRICS_OPTIONS_H_

#include <string>

namespace tern::metrics {

struct MetricsOptions {
  // IP:PORT of the HTTP endpoint /metrics (port 0 picks a free one);
  // empty: no endpoint (the role still counts, which costs next to nothing).
  std::string listen;
  // Seconds the endpoint stays up after the role finished, so that a last
  // scrape sees the final values (a worker's last steps).
  double linger_s = 0;
};

}  // namespace tern::metrics

#endif  // TERN_COMMON_METRICS_METRICS_OPTIONS_H_

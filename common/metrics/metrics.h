// The Prometheus metrics of one role (DESIGN section 8): the registry its
// counters live in and, with --metrics_listen, the HTTP endpoint that
// serves them at /metrics (prometheus-cpp's exposer: the text format is
// the library's, not ours). Every role (tern ps as shard or LPS, tern
// worker, tern global) makes one in main() and hands the registry to the
// parts that count (server/shard_metrics.h, worker/worker_metrics.h, ...).
//
// The endpoint is plain HTTP and read-only: it answers GET /metrics with
// numbers (steps, bytes, latencies, ids of roles), never parameters,
// gradients, paths or certificates, and nothing it receives changes the
// run. That is why, unlike the gRPC servers (common/net/plaintext.h), it
// may listen beyond loopback without --insecure: Prometheus scrapes over
// the cluster's network, and a worker has no --insecure to give.
//
// Thread-safety: the registry and the metrics in it are thread-safe
// (prometheus-cpp's counters and gauges are atomics); a Metrics object is
// made and destroyed by one thread.
#ifndef TERN_COMMON_METRICS_METRICS_H_
#define TERN_COMMON_METRICS_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/logging.h"
#include "common/metrics/metrics_options.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace tern::metrics {

class Metrics {
 public:
  // A registry, served at http://<options.listen>/metrics when listen is
  // not empty. INVALID_ARGUMENT for an address ValidateMetricsOptions
  // refuses; UNAVAILABLE naming the address when it cannot be bound (in
  // use, not this machine's). When serving, logs "Prometheus metrics on
  // <listen> (port <p>)" to `logger` (when not null), every role's line.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(
      const MetricsOptions& options, const Logger& logger = nullptr);
  // Stops the endpoint (a scrape in progress finishes first).
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Lives as long as this object; what is registered stays registered.
  prometheus::Registry& registry() { return *registry_; }

  // The bound port, 0 when not serving.
  int port() const { return port_; }

  // When serving, sleeps --metrics_linger_s so that a last scrape can see
  // a finished role's final values; returns at once otherwise.
  void Linger() const;

 private:
  explicit Metrics(const MetricsOptions& options);

  const MetricsOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  // Declared after the registry: the endpoint stops before the registry
  // it reads goes.
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tern::metrics

#endif  // TERN_COMMON_METRICS_METRICS_H_

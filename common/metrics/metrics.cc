#include "common/metrics/metrics.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_flags.h"

namespace tern::metrics {
namespace {

// One thread answers scrapes; Prometheus scrapes one at a time.
constexpr size_t kExposerThreads = 1;

}  // namespace

Metrics::Metrics(const MetricsOptions& options)
    : options_(options), registry_(std::make_shared<prometheus::Registry>()) {}

Metrics::~Metrics() = default;

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(
    const MetricsOptions& options, const Logger& logger) {
  if (absl::Status status = ValidateMetricsOptions(options); !status.ok()) {
    return status;
  }
  std::unique_ptr<Metrics> metrics(new Metrics(options));
  if (options.listen.empty()) return metrics;
  // civetweb reports a port it cannot bind by throwing from the
  // constructor; nothing else here throws.
  try {
    metrics->exposer_ =
        std::make_unique<prometheus::Exposer>(options.listen, kExposerThreads);
  } catch (const std::exception& error) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_listen: cannot serve metrics on ",
                     options.listen, ": ", error.what(),
                     " (the port is in use, or the address is not this "
                     "machine's)"));
  }
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
  metrics->port_ = ports.empty() ? 0 : ports.front();
  if (logger != nullptr) {
    logger->info("Prometheus metrics on {} (port {})", options.listen,
                 metrics->port_);
  }
  return metrics;
}

void Metrics::Linger() const {
  if (exposer_ == nullptr || !(options_.linger_s > 0)) return;
  absl::SleepFor(absl::Seconds(options_.linger_s));
}

}  // namespace tern::metrics

// --metrics_listen and --metrics_linger_s (TERN_METRICS_LISTEN,
// TERN_METRICS_LINGER_S), registered by every role (tern ps, tern worker,
// tern global) and by tern launch, which hands each child its own.
#ifndef TERN_COMMON_METRICS_METRICS_FLAGS_H_
#define TERN_COMMON_METRICS_METRICS_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "common/flags/cli_fwd.h"
#include "common/metrics/metrics_options.h"

namespace tern::metrics {

// Registers the two flags on `app`, writing into `*options`, which must
// outlive the parse; in the --help group `group` when it is not empty.
void AddMetricsFlags(CLI::App* app, MetricsOptions* options,
                     const std::string& group = "");

// INVALID_ARGUMENT naming the flag when --metrics_listen is neither empty
// nor IP:PORT (an IPv4 address or a bracketed IPv6 one, a port in
// [0, 65535]; the HTTP server resolves no names), or --metrics_linger_s
// is not a finite number in [0, 600].
absl::Status ValidateMetricsOptions(const MetricsOptions& options);

}  // namespace tern::metrics

#endif  // TERN_COMMON_METRICS_METRICS_FLAGS_H_

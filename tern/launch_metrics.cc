#include "tern/launch_metrics.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/metrics/metrics_flags.h"

namespace tern {
namespace {

// "IP:PORT" split at its last colon; ValidateMetricsOptions checked it.
std::pair<std::string, uint32_t> SplitListen(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port)) {
    return {std::string(listen), 0};
  }
  return {std::string(listen.substr(0, colon)), port};
}

// Where Prometheus on this machine reaches a child listening on `host`:
// a wildcard is reached on loopback.
std::string ScrapeHost(const std::string& host) {
  if (host == "0.0.0.0") return "127.0.0.1";
  if (host == "[::]") return "[::1]";
  return host;
}

}  // namespace

absl::Status ValidateLaunchMetrics(const metrics::MetricsOptions& metrics,
                                   uint32_t children) {
  if (absl::Status status = metrics::ValidateMetricsOptions(metrics);
      !status.ok() || metrics.listen.empty()) {
    return status;
  }
  const uint32_t base = SplitListen(metrics.listen).second;
  if (base == 0) {
    return absl::InvalidArgumentError(
        "--metrics_listen: launch needs a base port from 1 up (the children "
        "take it and the ports after it)");
  }
  if (base + children - 1 > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen: ", children, " children from port ",
                     base, " would pass port 65535"));
  }
  return absl::OkStatus();
}

LaunchMetrics::LaunchMetrics(metrics::MetricsOptions metrics,
                             std::string config_path)
    : metrics_(std::move(metrics)), config_path_(std::move(config_path)) {}

std::vector<std::string> LaunchMetrics::ArgsFor(const std::string& name) {
  if (!enabled()) return {};
  const auto [host, base] = SplitListen(metrics_.listen);
  const uint32_t port = base + static_cast<uint32_t>(targets_.size());
  targets_.emplace_back(name, absl::StrCat(ScrapeHost(host), ":", port));
  return {absl::StrCat("--metrics_listen=", host, ":", port),
          absl::StrCat("--metrics_linger_s=", metrics_.linger_s)};
}

std::string LaunchMetrics::ScrapeConfig() const {
  std::string text = absl::StrCat(
      "# Written by tern launch: scrapes every process of the run "
      "(prometheus --config.file=<this file>).\n"
      "global:\n  scrape_interval: 5s\n  scrape_timeout: 4s\n"
      "scrape_configs:\n  - job_name: tern\n    static_configs:\n");
  for (const auto& [name, address] : targets_) {
    absl::StrAppend(&text, "      - targets: [\"", address, "\"]\n",
                    "        labels: {process: \"", name, "\"}\n");
  }
  return text;
}

absl::Status LaunchMetrics::WriteScrapeConfig() const {
  if (!enabled()) return absl::OkStatus();
  std::ofstream out(config_path_, std::ios::trunc);
  out << ScrapeConfig();
  out.close();
  if (!out) {
    return absl::InternalError(
        absl::StrCat("cannot write the scrape config ", config_path_));
  }
  return absl::OkStatus();
}

}  // namespace tern

#include "common/metrics/metrics_flags.h"

#include <arpa/inet.h>

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/flags/flags.h"

namespace tern::metrics {
namespace {

// The longest --metrics_linger_s: a stop must not wait on it for long.
constexpr double kMaxLingerS = 600;

// Whether `host` is an IPv4 address or a bracketed IPv6 one.
bool IsIpLiteral(absl::string_view host) {
  std::string text(host);
  unsigned char address[sizeof(struct in6_addr)];
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    return inet_pton(AF_INET6, text.c_str(), address) == 1;
  }
  return inet_pton(AF_INET, text.c_str(), address) == 1;
}

}  // namespace

void AddMetricsFlags(CLI::App* app, MetricsOptions* options,
                     const std::string& group) {
  CLI::Option* const added[] = {
      flags::Flag(app, "metrics_listen", &options->listen,
                  "IP:PORT to serve Prometheus metrics on, at /metrics "
                  "(plain HTTP, read-only numbers; port 0 picks one); "
                  "empty: none"),
      flags::Flag(app, "metrics_linger_s", &options->linger_s,
                  "with --metrics_listen: seconds /metrics stays up after "
                  "this process's work is done, for a last scrape"),
  };
  if (group.empty()) return;
  for (CLI::Option* option : added) option->group(group);
}

absl::Status ValidateMetricsOptions(const MetricsOptions& options) {
  if (!std::isfinite(options.linger_s) || options.linger_s < 0 ||
      options.linger_s > kMaxLingerS) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_linger_s=", options.linger_s,
                     " is not a finite number in [0, ", kMaxLingerS, "]"));
  }
  if (options.listen.empty()) return absl::OkStatus();
  const absl::string_view listen = options.listen;
  const size_t colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos ||
      !IsIpLiteral(listen.substr(0, colon)) ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port > 65535 ||
      listen.substr(colon + 1).find_first_not_of("0123456789") !=
          absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_listen: '", listen,
        "' is not IP:PORT (e.g. 127.0.0.1:9400, 0.0.0.0:9400, [::1]:9400; "
        "names are not resolved)"));
  }
  return absl::OkStatus();
}

}  // namespace tern::metrics

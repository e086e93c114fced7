#include "global/gs_main.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/flags/flag_checks.h"
#include "common/metrics/metrics.h"
#include "common/net/server.h"
#include "common/process/exit_codes.h"
#include "common/process/serve_loop.h"
#include "common/process/server_role.h"
#include "common/records/server_report.h"
#include "global/gs_flags.h"
#include "global/gs_metrics.h"
#include "global/gs_service.h"
#include "global/gs_state.h"
#include "global/round_aggregator.h"

namespace tern::global {
namespace {

// How long in-flight calls may take to finish at shutdown.
constexpr absl::Duration kShutdownGrace = absl::Seconds(5);

// The round aggregator's options from the flags.
RoundAggregatorOptions MakeAggregatorOptions(const GsOptions& options) {
  RoundAggregatorOptions aggregator_options;
  aggregator_options.num_datacenters = options.num_datacenters;
  aggregator_options.seed = options.seed;
  aggregator_options.t_global = absl::Seconds(options.t_global_s);
  aggregator_options.max_lag = options.max_lag;
  aggregator_options.hold_timeout = absl::Seconds(options.hold_timeout_s);
  aggregator_options.max_message_bytes =
      flags::MessageBytes(options.max_message_mb);
  if (!options.state_dir.empty()) {
    aggregator_options.state_path = GsStatePath(options.state_dir);
    aggregator_options.state_sync = options.state_sync;
  }
  return aggregator_options;
}

// Serves `service` on --listen, with health and the --tls_* files; logs
// the failure, if any.
absl::StatusOr<std::unique_ptr<net::Server>> Serve(const GsOptions& options,
                                                   GsService* service,
                                                   const Logger& logger) {
  return net::StartLogged(
      process::ServingOptions(
          options, static_cast<int>(options.num_datacenters), logger),
      {{service, tern::v1::GlobalServer::service_full_name()}});
}

// Logs where the rounds stopped and writes --report_file, if given.
void Report(const GsOptions& options, const RoundAggregator& aggregator,
            const Logger& logger) {
  const RoundStats stats = aggregator.stats();
  logger->info(
      "stopped at round {}: {} rounds closed, {} late updates, {} duplicates, "
      "{} refused, {} holds ({} held calls timed out), {} bytes in, {} bytes "
      "out",
      aggregator.open_round(), stats.rounds_closed, stats.late_submissions,
      stats.duplicates, stats.refused, stats.holds, stats.hold_timeouts,
      stats.bytes_in, stats.bytes_out);
  if (options.report_file.empty()) return;
  records::GlobalServerReport report;
  report.open_round = aggregator.open_round();
  report.rounds_closed = stats.rounds_closed;
  report.late_submissions = stats.late_submissions;
  report.duplicates = stats.duplicates;
  report.refused = stats.refused;
  report.holds = stats.holds;
  report.hold_timeouts = stats.hold_timeouts;
  report.bytes_in = stats.bytes_in;
  report.bytes_out = stats.bytes_out;
  if (absl::Status status =
          records::WriteGlobalServerReport(options.report_file, report);
      !status.ok()) {
    logger->warn("--report_file: {}", std::string(status.message()));
  }
}

// The rounds: the aggregator, its gRPC service and server, until a stop;
// their metrics in `metrics`.
int ServeRounds(const GsOptions& options, const Logger& logger,
                const process::StopRequest& stop, metrics::Metrics& metrics) {
  if (!process::MakeStateDirIfAsked(options.state_dir, logger)) {
    return process::kExitPermanent;
  }
  GsMetrics round_metrics(metrics.registry(), options.num_datacenters);
  RoundAggregatorOptions aggregator_options = MakeAggregatorOptions(options);
  aggregator_options.round_closed = [&round_metrics](absl::Duration open_for) {
    round_metrics.RoundClosed(open_for);
  };
  absl::StatusOr<std::unique_ptr<RoundAggregator>> aggregator =
      RoundAggregator::Create(std::move(aggregator_options), logger);
  if (!aggregator.ok()) {
    logger->error("{}", std::string(aggregator.status().message()));
    return process::kExitPermanent;
  }
  // Declared after the aggregator, so the server goes first.
  // Under mTLS a caller must be the LPS of the data center it names, of
  // --run_id when it is set.
  GsService service(aggregator->get(), logger,
                    process::CallerPolicy(options));
  absl::StatusOr<std::unique_ptr<net::Server>> server =
      Serve(options, &service, logger);
  // Most often the port is still held by a previous instance (transient);
  // a TLS file that will not do is permanent.
  if (!server.ok()) return process::ExitCodeFor(server.status());
  const int port = (*server)->port();
  const auto shut_down = [&] {
    (*aggregator)
        ->Close(absl::UnavailableError("the global server is shutting down"));
    (*server)->Shutdown(kShutdownGrace);
  };
  if (!process::WritePortFileIfAsked(options.port_file, port, logger)) {
    shut_down();
    return process::kExitPermanent;
  }
  logger->info(
      "global server serving on {} (port {}) for {} data centers: "
      "T_global {}s, max lag {} rounds, hold timeout {}s",
      options.listen, port, options.num_datacenters, options.t_global_s,
      options.max_lag, options.hold_timeout_s);
  // The rounds' clock never fails the global server: only a stop ends it.
  const int exit_code =
      process::ServeUntilStopped(stop, logger, [&](absl::Time now) {
        (*aggregator)->Tick(now);
        round_metrics.Update((*aggregator)->stats(),
                             (*aggregator)->open_round(),
                             (*aggregator)->lags(), options.max_lag);
        return absl::OkStatus();
      });
  shut_down();
  Report(options, **aggregator, logger);
  return exit_code;
}

}  // namespace

int RunGlobalServer(const GsOptions& options, Logger logger,
                    const process::StopRequest& stop) {
  if (logger == nullptr) logger = MakeLogger("global", "0");
  return process::RunServerRole(
      options, ValidateGsOptions(options), logger,
      [&](metrics::Metrics& metrics) {
        return ServeRounds(options, logger, stop, metrics);
      });
}

}  // namespace tern::global

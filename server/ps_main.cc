#include "server/ps_main.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/checksum.h"
#include "common/flags/flag_checks.h"
#include "common/metrics/metrics.h"
#include "common/net/peer_identity.h"
#include "common/net/plaintext.h"
#include "common/net/server.h"
#include "common/net/tls_flags.h"
#include "common/process/exit_codes.h"
#include "common/process/serve_loop.h"
#include "common/process/server_role.h"
#include "common/records/server_report.h"
#include "server/aggregator.h"
#include "server/gs_link.h"
#include "server/local_ps.h"
#include "server/lps_metrics.h"
#include "server/lps_service.h"
#include "server/ps_flags.h"
#include "server/ps_service.h"
#include "server/shard_metrics.h"
#include "server/worker_loss.h"

namespace tern::server {
namespace {

// How long in-flight calls may take to finish at shutdown.
constexpr absl::Duration kShutdownGrace = absl::Seconds(5);

// Serves `service` (the shard's or the LPS's tern.v1.ParameterServer) on
// --listen, with health and the --tls_* files. Logs the failure, if any:
// most often the port is still held by a previous instance (UNAVAILABLE:
// the caller exits transient); a TLS file that will not do is permanent.
absl::StatusOr<std::unique_ptr<net::Server>> Serve(const PsOptions& options,
                                                   grpc::Service* service,
                                                   const Logger& logger) {
  return net::StartLogged(
      process::ServingOptions(options, static_cast<int>(options.num_workers),
                              logger),
      {{service, tern::v1::ParameterServer::service_full_name()}});
}

// The LPS's options from the flags.
LocalPsOptions MakeLocalPsOptions(const PsOptions& options) {
  LocalPsOptions lps_options;
  lps_options.mode = options.mode;
  lps_options.num_workers = options.num_workers;
  lps_options.run_id = options.run_id;
  switch (EffectiveWeightCodec(options)) {
    case WeightCodec::kInt8:
      lps_options.weight_codec = kernels::CodecId::kInt8;
      break;
    case WeightCodec::kFp32:
      lps_options.weight_codec = kernels::CodecId::kFp32;
      break;
    default:
      lps_options.weight_codec = kernels::CodecId::kTernGrad;
      break;
  }
  lps_options.global = !options.global.empty();
  lps_options.global_name =
      absl::StrCat("the global server at ", options.global);
  lps_options.sync_every = options.sync_every;
  if (options.g_thresh > 0) lps_options.g_thresh = options.g_thresh;
  lps_options.steps_per_epoch = options.steps_per_epoch;
  lps_options.sync_timeout = absl::Seconds(options.sync_timeout_s);
  lps_options.hold_limit = absl::Seconds(options.barrier_timeout_s);
  lps_options.join_timeout = absl::Seconds(options.join_timeout_s);
  lps_options.max_message_bytes = flags::MessageBytes(options.max_message_mb);
  return lps_options;
}

// Starts the LPS's link to --global; null when there is no global server.
std::unique_ptr<GsLink> StartGsLink(const PsOptions& options, LocalPs* lps,
                                    const Logger& logger) {
  if (options.global.empty()) return nullptr;
  GsLinkOptions link_options;
  link_options.address = options.global;
  link_options.datacenter = options.datacenter;
  link_options.num_datacenters = options.num_datacenters;
  link_options.give_up = absl::Seconds(options.join_timeout_s);
  link_options.security =
      net::SecurityFromFlags(options.tls, options.insecure);
  if (link_options.security.kind == net::TransportSecurity::Kind::kTls) {
    // Only the run's global server may answer (--run_id; any run without).
    link_options.security.server_verifier =
        net::ServerIdentityVerifier({net::PeerRole::kGlobal}, options.run_id);
  }
  link_options.max_message_bytes = flags::MessageBytes(options.max_message_mb);
  if (const std::string warning = net::PlaintextWarning(
          link_options.security, options.global,
          "connecting to the global server at");
      !warning.empty()) {
    logger->warn("{}", warning);
  }
  auto link = std::make_unique<GsLink>(link_options, lps, logger);
  link->Start();
  return link;
}

// Logs where the LPS stopped and writes --report_file, if given.
void ReportLps(const PsOptions& options, const LocalPs& lps,
               const Logger& logger) {
  logger->info("stopped at step {}, {}checksum {}", lps.completed_steps(),
               lps.finished() ? "final " : "",
               FormatChecksum(lps.checksum()));
  if (options.report_file.empty()) return;
  records::LpsReport report;
  report.datacenter = options.datacenter;
  report.steps = lps.completed_steps();
  report.final_sync_done = lps.finished();
  report.param_checksum = FormatChecksum(lps.checksum());
  report.wan_bytes_up = lps.wan_bytes_up();
  report.wan_bytes_down = lps.wan_bytes_down();
  if (absl::Status status =
          records::WriteLpsReport(options.report_file, report);
      !status.ok()) {
    logger->warn("--report_file: {}", std::string(status.message()));
  }
}

// `tern ps --mode=weightgrad|gaia`: a local parameter server and its link
// to the global server (server/WEIGHTGRAD.md).
int RunLocalParameterServer(const PsOptions& options, Logger logger,
                            const process::StopRequest& stop,
                            metrics::Metrics& metrics) {
  const prometheus::Labels labels = ShardMetrics::LpsLabels(options.datacenter);
  ShardMetrics push_metrics(metrics.registry(), labels);
  LpsMetrics round_metrics(metrics.registry(), labels);
  LocalPsOptions lps_options = MakeLocalPsOptions(options);
  lps_options.metrics = &round_metrics;
  if (!process::MakeStateDirIfAsked(options.state_dir, logger)) {
    return process::kExitPermanent;
  }
  if (!options.state_dir.empty()) {
    lps_options.state_path = LpsStatePath(options.state_dir);
    lps_options.checkpoint_every = options.checkpoint_every;
    lps_options.state_sync = options.state_sync;
  }
  absl::StatusOr<std::unique_ptr<LocalPs>> lps =
      LocalPs::Create(std::move(lps_options), logger);
  if (!lps.ok()) {
    logger->error("{}", std::string(lps.status().message()));
    return process::kExitPermanent;
  }
  LpsService service(
      lps->get(), logger, process::CallerPolicy(options),
      static_cast<uint64_t>(options.datacenter) * options.num_workers,
      &push_metrics);
  absl::StatusOr<std::unique_ptr<net::Server>> server =
      Serve(options, &service, logger);
  if (!server.ok()) return process::ExitCodeFor(server.status());
  const int port = (*server)->port();
  std::unique_ptr<GsLink> link = StartGsLink(options, lps->get(), logger);
  const auto shut_down = [&] {
    if (link != nullptr) link->Stop();
    (*lps)->Close(
        absl::UnavailableError("the local parameter server is shutting down"));
    (*server)->Shutdown(kShutdownGrace);
  };
  if (!process::WritePortFileIfAsked(options.port_file, port, logger)) {
    shut_down();
    return process::kExitPermanent;
  }
  logger->info(
      "LPS of data center {} of {} ({}, weights in {}) serving on {} (port "
      "{}) for {} workers; {}",
      options.datacenter, options.num_datacenters, RunModeName(options.mode),
      WeightCodecName(EffectiveWeightCodec(options)),
      options.listen, port, options.num_workers,
      options.global.empty()
          ? std::string("no global server")
          : absl::StrCat("global server ", options.global, ", a round every ",
                         options.sync_every, " steps"));
  const int exit_code =
      process::ServeUntilStopped(stop, logger, [&](absl::Time now) {
        push_metrics.SetStep((*lps)->completed_steps());
        push_metrics.SetWorkersJoined((*lps)->joined_workers());
        return (*lps)->ExpireWaits(now);
      });
  shut_down();
  ReportLps(options, **lps, logger);
  return exit_code;
}

// `tern ps --mode=terngrad`: one shard of the parameter server.
int RunShard(const PsOptions& options, Logger logger,
             const process::StopRequest& stop, metrics::Metrics& metrics) {
  AggregatorOptions aggregator_options;
  aggregator_options.shard_index = options.shard_index;
  aggregator_options.num_shards = options.num_shards;
  aggregator_options.num_workers = options.num_workers;
  aggregator_options.run_id = options.run_id;
  aggregator_options.barrier_timeout = absl::Seconds(options.barrier_timeout_s);
  aggregator_options.join_timeout = absl::Seconds(options.join_timeout_s);
  aggregator_options.max_message_bytes =
      flags::MessageBytes(options.max_message_mb);
  aggregator_options.straggler_warn = absl::Seconds(options.straggler_warn_s);
  // Checked with the flags.
  aggregator_options.on_worker_loss =
      *ParseWorkerLossPolicy(options.on_worker_loss);
  aggregator_options.worker_loss_timeout =
      absl::Seconds(options.worker_loss_timeout_s);
  aggregator_options.catch_up_bytes = static_cast<uint64_t>(options.catch_up_mb)
                                      << 20;
  if (!process::MakeStateDirIfAsked(options.state_dir, logger)) {
    return process::kExitPermanent;
  }
  if (!options.state_dir.empty()) {
    aggregator_options.state_path =
        ShardStatePath(options.state_dir, options.shard_index);
    aggregator_options.state_sync = options.state_sync;
  }
  absl::StatusOr<std::unique_ptr<Aggregator>> aggregator =
      Aggregator::Create(std::move(aggregator_options), logger);
  if (!aggregator.ok()) {
    logger->error("{}", std::string(aggregator.status().message()));
    return process::kExitPermanent;
  }
  // Declared after the aggregator, so the server goes first.
  ShardMetrics shard_metrics(metrics.registry(),
                             ShardMetrics::ShardLabels(options.shard_index));
  PsService service(aggregator->get(), logger, process::CallerPolicy(options), &shard_metrics);
  absl::StatusOr<std::unique_ptr<net::Server>> server =
      Serve(options, &service, logger);
  if (!server.ok()) return process::ExitCodeFor(server.status());
  const int port = (*server)->port();
  const auto shut_down = [&] {
    (*aggregator)
        ->Close(absl::UnavailableError(
            absl::StrCat("shard ", options.shard_index, " is shutting down")));
    (*server)->Shutdown(kShutdownGrace);
  };
  if (!process::WritePortFileIfAsked(options.port_file, port, logger)) {
    shut_down();
    return process::kExitPermanent;
  }
  logger->info("shard {} of {} serving on {} (port {}) for {} workers",
               options.shard_index, options.num_shards, options.listen, port,
               options.num_workers);
  const int exit_code =
      process::ServeUntilStopped(stop, logger, [&](absl::Time now) {
        shard_metrics.SetStep((*aggregator)->step());
        shard_metrics.SetWorkersJoined((*aggregator)->joined_workers());
        return (*aggregator)->ExpireWaits(now);
      });
  shut_down();
  logger->info("stopped at step {}", (*aggregator)->step());
  return exit_code;
}

}  // namespace

int RunParameterServer(const PsOptions& options, Logger logger,
                       const process::StopRequest& stop) {
  if (logger == nullptr) {
    logger = options.mode == RunMode::kTernGrad
                 ? MakeLogger("ps", absl::StrCat(options.shard_index))
                 : MakeLogger("lps", absl::StrCat(options.datacenter));
  }
  return process::RunServerRole(
      options, ValidatePsOptions(options), logger,
      [&](metrics::Metrics& metrics) {
        return options.mode != RunMode::kTernGrad
                   ? RunLocalParameterServer(options, logger, stop, metrics)
                   : RunShard(options, logger, stop, metrics);
      });
}

}  // namespace tern::server

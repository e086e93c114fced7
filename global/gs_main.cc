#include "global/gs_main.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/records/server_report.h"
#include "global/gs_flags.h"
#include "global/gs_service.h"
#include "global/round_aggregator.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace tern::global {
namespace {

// How often the serving loop moves the rounds on (T_global, hold
// timeouts) while it waits for a signal.
constexpr absl::Duration kTick = absl::Milliseconds(100);
// How long in-flight calls may take to finish at shutdown.
constexpr absl::Duration kShutdownGrace = absl::Seconds(5);

// Blocks SIGINT and SIGTERM in the calling thread for its lifetime and
// restores the previous mask after taking the signals still pending (which
// would otherwise kill the process the moment they are unblocked).
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  }
  ~BlockedSignals() {
    const timespec zero{0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  // The signal that arrived within `timeout`, or 0.
  int Wait(absl::Duration timeout) const {
    const timespec wait = absl::ToTimespec(timeout);
    const int signal = sigtimedwait(&set_, nullptr, &wait);
    return signal > 0 ? signal : 0;  // -1: EAGAIN (timeout) or EINTR
  }

 private:
  sigset_t set_;
  sigset_t previous_;
};

}  // namespace

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--port_file: cannot create ", temporary, ": ", strerror(errno)));
  }
  const std::string text = absl::StrCat(port, "\n");
  const bool written =
      std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    return absl::InvalidArgumentError(
        absl::StrCat("--port_file: cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::InvalidArgumentError(
        absl::StrCat("--port_file: cannot rename ", temporary, " to ", path,
                     ": ", strerror(error)));
  }
  return absl::OkStatus();
}

int RunGlobalServer(const GsOptions& options, Logger logger) {
  if (logger == nullptr) logger = MakeLogger("global", "0");
  if (absl::Status status = ValidateGsOptions(options); !status.ok()) {
    logger->error("{}", std::string(status.message()));
    return kExitConfigError;
  }
  logger->set_level(*ParseLogLevel(options.log_level));

  // Before gRPC starts its threads, so that they inherit the mask.
  const BlockedSignals signals;

  RoundAggregatorOptions aggregator_options;
  aggregator_options.num_datacenters = options.num_datacenters;
  aggregator_options.seed = options.seed;
  aggregator_options.t_global = absl::Seconds(options.t_global_s);
  aggregator_options.max_lag = options.max_lag;
  aggregator_options.hold_timeout = absl::Seconds(options.hold_timeout_s);
  aggregator_options.max_message_bytes =
      static_cast<uint64_t>(options.max_message_mb) << 20;
  absl::StatusOr<std::unique_ptr<RoundAggregator>> aggregator =
      RoundAggregator::Create(std::move(aggregator_options), logger);
  if (!aggregator.ok()) {
    logger->error("{}", std::string(aggregator.status().message()));
    return kExitConfigError;
  }
  // Declared after the aggregator, so the server goes first.
  GsService service(aggregator->get(), logger);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &port);
  const int max_message_bytes = static_cast<int>(options.max_message_mb) << 20;
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    // Most often the port is still held by a previous instance: transient.
    logger->error("cannot listen on {} (is the port in use?)", options.listen);
    return kExitTransient;
  }

  const auto shut_down = [&] {
    (*aggregator)
        ->Close(absl::UnavailableError("the global server is shutting down"));
    server->GetHealthCheckService()->Shutdown();
    server->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
    server->Wait();
  };
  if (!options.port_file.empty()) {
    if (absl::Status status = WritePortFile(options.port_file, port);
        !status.ok()) {
      logger->error("{}", std::string(status.message()));
      shut_down();
      return kExitConfigError;
    }
  }
  logger->info(
      "global server serving on {} (port {}) for {} data centers: "
      "T_global {}s, max lag {} rounds, hold timeout {}s",
      options.listen, port, options.num_datacenters, options.t_global_s,
      options.max_lag, options.hold_timeout_s);

  while (true) {
    if (const int signal = signals.Wait(kTick); signal != 0) {
      logger->info("{} received: shutting down", strsignal(signal));
      break;
    }
    (*aggregator)->Tick(absl::Now());
  }
  shut_down();
  const RoundStats stats = (*aggregator)->stats();
  logger->info(
      "stopped at round {}: {} rounds closed, {} late updates, {} duplicates, "
      "{} refused, {} holds ({} held calls timed out), {} bytes in, {} bytes "
      "out",
      (*aggregator)->open_round(), stats.rounds_closed, stats.late_submissions,
      stats.duplicates, stats.refused, stats.holds, stats.hold_timeouts,
      stats.bytes_in, stats.bytes_out);
  if (!options.report_file.empty()) {
    records::GlobalServerReport report;
    report.open_round = (*aggregator)->open_round();
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
  return kExitOk;
}

}  // namespace tern::global

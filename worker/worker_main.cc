#include "worker/worker_main.h"

#include <memory>
#include <string>
#include <utility>

#include "ATen/Context.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/net/pacing.h"
#include "common/process/exit_codes.h"
#include "common/status_macros.h"
#include "worker/client_options.h"
#include "worker/datasets.h"
#include "worker/math_threads.h"
#include "worker/model_export.h"
#include "worker/models.h"
#include "worker/ps_client.h"
#include "worker/step_metrics.h"
#include "worker/trainer.h"
#include "worker/worker_flags.h"
#include "worker/worker_metrics.h"

namespace tern::worker {
namespace {

absl::Status WriteTrainedModel(const Model& model, const std::string& path,
                               const Logger& logger) {
  const absl::Time start = absl::Now();
  TERN_ASSIGN_OR_RETURN(const uint64_t bytes, SaveModel(model, path));
  logger->info("trained model written to {} ({:.1f} MiB, {:.2f} s)", path,
               static_cast<double>(bytes) / (1 << 20),
               absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

absl::Status Train(const WorkerOptions& options, const Logger& logger) {
  TERN_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  if (!options.save_model.empty()) {
    TERN_RETURN_IF_ERROR(CheckModelPath(options.save_model));
  }
  TERN_ASSIGN_OR_RETURN(const spdlog::level::level_enum level,
                        ParseLogLevel(options.log_level));
  logger->set_level(level);
  // The thread pools are per process; the flag sets them once here.
  SetMathThreads(options.threads);
  const std::unique_ptr<net::ConnectionPacer> pacer =
      net::PaceConnections(options.pace_mbit, logger);

  TERN_ASSIGN_OR_RETURN(
      TrainTest data,
      LoadDataset(options.dataset, options.data_dir, options.seed));
  // Parameter localization (DESIGN section 3): every worker draws the same
  // initial parameters from the same seed; the join checksum proves it.
  at::manual_seed(options.seed);
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<Model> model,
                        MakeModel(options.model, data.train.shape));
  const std::shared_ptr<const Model> trained = model;
  TERN_ASSIGN_OR_RETURN(
      std::unique_ptr<Trainer> trainer,
      Trainer::Create(options, std::move(model), std::move(data), logger));

  PsClientOptions client_options =
      ClientOptionsFor(options, trainer->max_message_bytes());
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client,
                        PsClient::Connect(options.ps, client_options, logger));

  std::unique_ptr<MetricsWriter> metrics;
  if (!options.metrics_out.empty()) {
    TERN_ASSIGN_OR_RETURN(
        metrics,
        MetricsWriter::Open(options.metrics_out, trainer->start_step() > 0));
  }
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<metrics::Metrics> prometheus,
                        metrics::Metrics::Start(options.metrics, logger));
  // Labelled by its index in the whole run, which its data slice is (a
  // geo worker's --worker_id counts within its data center).
  WorkerMetrics live(prometheus->registry(), options.DataSlice(),
                     kernels::CodecName(options.codec),
                     std::string(TrainModeName(options.mode)));
  absl::Status status = trainer->Run(*client, metrics.get(), &live);
  if (status.ok() && !options.save_model.empty()) {
    status = WriteTrainedModel(*trained, options.save_model, logger);
  }
  prometheus->Linger();
  return status;
}

}  // namespace

int RunWorker(const WorkerOptions& options, Logger logger) {
  const absl::Status status = Train(options, logger);
  const int code = process::ExitCodeFor(status);
  if (!status.ok()) {
    logger->error("{} (exit {}, {})", status.ToString(), code,
                  code == process::kExitTransient
                      ? "transient: a restart may succeed"
                      : "permanent");
  }
  return code;
}

}  // namespace tern::worker

// `tern worker`: builds everything a worker needs from its options and
// trains (DESIGN sections 3 and 7). tern/main.cc parses the flags
// (worker/worker_flags.h) and calls RunWorker.
#ifndef TERN_WORKER_WORKER_MAIN_H_
#define TERN_WORKER_WORKER_MAIN_H_

#include "common/logging.h"
#include "worker/worker_options.h"

namespace tern::worker {

// Validates `options`, loads the data set, builds the model (after
// torch::manual_seed(options.seed), so all workers start identical), sets
// libtorch's thread count, connects to the shards and trains. Logs the
// error, if any, and returns the exit code for the status it ended with
// (process::ExitCodeFor, common/process/exit_codes.h: permanent for a bad
// flag, a missing data set, a model the shards refuse, diverged replicas;
// transient for a shard unreachable or too slow).
int RunWorker(const WorkerOptions& options, Logger logger);

}  // namespace tern::worker

#endif  // TERN_WORKER_WORKER_MAIN_H_

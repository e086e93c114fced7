// `tern worker`: builds everything a worker needs from its options and
// trains (DESIGN sections 3 and 7). tern/main.cc parses the flags
// (worker/worker_flags.h) and calls RunWorker.
#ifndef TERN_WORKER_WORKER_MAIN_H_
#define TERN_WORKER_WORKER_MAIN_H_

#include "absl/status/status.h"
#include "common/logging.h"
#include "worker/worker_options.h"

namespace tern::worker {

// Process exit codes, following Kubernetes' restart policy (DESIGN
// section 7).
inline constexpr int kExitOk = 0;
// Permanent: a bad flag, a missing data set, a model the shards refuse,
// diverged replicas, a non-finite gradient. Restarting does not help.
inline constexpr int kExitPermanent = 1;
// Transient: a shard unreachable or too slow (UNAVAILABLE,
// DEADLINE_EXCEEDED), a call aborted or cancelled, resources exhausted.
// A restart may succeed.
inline constexpr int kExitTransient = 128;

// The exit code for the status a worker ended with.
int ExitCodeFor(const absl::Status& status);

// Validates `options`, loads the data set, builds the model (after
// torch::manual_seed(options.seed), so all workers start identical), sets
// libtorch's thread count, connects to the shards and trains. Logs the
// error, if any, and returns the exit code.
int RunWorker(const WorkerOptions& options, Logger logger);

}  // namespace tern::worker

#endif  // TERN_WORKER_WORKER_MAIN_H_

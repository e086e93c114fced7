// The flags of `tern worker`: every field of WorkerOptions
// (worker/worker_options.h) as --<field_name>, also read from the
// environment as TERN_<FIELD_NAME> (a flag on the command line wins over
// the environment, which wins over the default). List fields take
// comma-separated values (--ps=h1:1,h2:2) or repeated flags.
#ifndef TERN_WORKER_WORKER_FLAGS_H_
#define TERN_WORKER_WORKER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags/cli_fwd.h"
#include "worker/worker_options.h"

namespace tern::worker {

// Registers the flags on `app` (the `worker` subcommand), writing into
// `*options`, which must outlive the parse. Each flag checks its own range
// or choices; CLI11 reports a bad value as "--<flag>: <reason>".
void AddWorkerFlags(CLI::App* app, WorkerOptions* options);

// The checks that involve several flags or that a parse cannot see
// (worker_id < num_workers, at least one shard, ...). INVALID_ARGUMENT
// naming the flags. RunWorker calls it first. Defined in
// worker_flags_check.cc.
absl::Status ValidateWorkerOptions(const WorkerOptions& options);

// Parses `args` ("--codec=onebit", ...) as the worker's flags, with their
// defaults, checks and TERN_<FLAG> variables, then ValidateWorkerOptions:
// `tern worker`'s configuration for a worker started otherwise (the Python
// API). INVALID_ARGUMENT with CLI11's message ("--codec: ...") for a bad
// one. Defined in worker_args.cc.
absl::StatusOr<WorkerOptions> ParseWorkerArgs(
    const std::vector<std::string>& args);

// Whether `name` is a --device the worker accepts: "cpu", "cuda" or
// "cuda:N" with N a device ordinal below 64 written without leading zeros.
bool IsDeviceName(const std::string& name);

}  // namespace tern::worker

#endif  // TERN_WORKER_WORKER_FLAGS_H_

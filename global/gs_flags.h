// The flags of `tern global`: every field of GsOptions (global/gs_options.h)
// as --<field_name>, also read from the environment as TERN_<FIELD_NAME>
// (the command line wins over the environment, which wins over the
// default).
#ifndef TERN_GLOBAL_GS_FLAGS_H_
#define TERN_GLOBAL_GS_FLAGS_H_

#include "absl/status/status.h"
#include "common/flags/cli_fwd.h"
#include "global/gs_options.h"

namespace tern::global {

// Registers the flags on `app` (the `global` subcommand), writing into
// `*options`, which must outlive the parse. Each flag checks its own range
// or choices; CLI11 reports a bad value naming the flag.
void AddGsFlags(CLI::App* app, GsOptions* options);

// Every check of the flags, for options that did not come through
// AddGsFlags (a test, a launcher). INVALID_ARGUMENT naming the flag.
// RunGlobalServer calls it first.
absl::Status ValidateGsOptions(const GsOptions& options);

}  // namespace tern::global

#endif  // TERN_GLOBAL_GS_FLAGS_H_

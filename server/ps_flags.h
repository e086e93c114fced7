// The flags of `tern ps`: every field of PsOptions (server/ps_options.h) as
// --<field_name>, also read from the environment as TERN_<FIELD_NAME> (the
// command line wins over the environment, which wins over the default).
#ifndef TERN_SERVER_PS_FLAGS_H_
#define TERN_SERVER_PS_FLAGS_H_

#include "absl/status/status.h"
#include "common/flags/cli_fwd.h"
#include "server/ps_options.h"

namespace tern::server {

// Registers the flags on `app` (the `ps` subcommand), writing into
// `*options`, which must outlive the parse. Each flag checks its own range
// or choices; CLI11 reports a bad value naming the flag.
void AddPsFlags(CLI::App* app, PsOptions* options);

// Every check of the flags, including those that involve several
// (--shard_index below --num_shards), for options that did not come through
// AddPsFlags (a cluster spec, a test). INVALID_ARGUMENT naming the flag.
// RunParameterServer calls it first.
absl::Status ValidatePsOptions(const PsOptions& options);

// "ternary", "int8", "fp32" ("" for kModeDefault): the --weight_codec name.
const char* WeightCodecName(WeightCodec codec);

// The codec an LPS sends its weights in: --weight_codec, or the mode's
// default (ternary for weightgrad, fp32 for gaia).
WeightCodec EffectiveWeightCodec(const PsOptions& options);

}  // namespace tern::server

#endif  // TERN_SERVER_PS_FLAGS_H_

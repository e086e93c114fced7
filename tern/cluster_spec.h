// The cluster spec (--cluster_spec FILE): a JSON tern.v1.ClusterSpec
// (proto/tern/v1/cluster_spec.proto) that tells `tern ps` and `tern worker`
// where the shards are and how many workers the job has, so that every pod of
// a deployment can share one file. Explicit flags and TERN_<FLAG> variables
// override the spec.
#ifndef TERN_TERN_CLUSTER_SPEC_H_
#define TERN_TERN_CLUSTER_SPEC_H_

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/ps_options.h"
#include "tern/v1/cluster_spec.pb.h"
#include "worker/worker_options.h"

namespace tern {

// Names of the flags given on the command line or through TERN_<FLAG>
// (without "--"): what the spec must not overwrite.
using ExplicitFlags = absl::flat_hash_set<std::string>;

// Parses a spec from JSON text. Unknown fields are errors (a misspelt
// "num_worker" must not silently give one worker). INVALID_ARGUMENT naming
// `source` (the file name, for messages) and the offending field.
absl::StatusOr<v1::ClusterSpec> ParseClusterSpec(absl::string_view json,
                                                 absl::string_view source);

// Reads and parses the file at `path`. NOT_FOUND / PERMISSION_DENIED /
// INVALID_ARGUMENT naming the path.
absl::StatusOr<v1::ClusterSpec> LoadClusterSpec(const std::string& path);

// Fills what the spec gives a shard and `explicit_flags` does not name:
// num_shards (= number of shard addresses), num_workers, and listen
// ("0.0.0.0:<port of entry shard_index>": a pod's advertised name need not
// resolve to an address it can bind). INVALID_ARGUMENT when shard_index is
// not below the number of shards.
absl::Status ApplyClusterSpec(const v1::ClusterSpec& spec,
                              absl::string_view source,
                              const ExplicitFlags& explicit_flags,
                              server::PsOptions* options);

// Fills what the spec gives a worker and `explicit_flags` does not name:
// ps (the shard addresses) and num_workers.
absl::Status ApplyClusterSpec(const v1::ClusterSpec& spec,
                              absl::string_view source,
                              const ExplicitFlags& explicit_flags,
                              worker::WorkerOptions* options);

}  // namespace tern

#endif  // TERN_TERN_CLUSTER_SPEC_H_

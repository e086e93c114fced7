// The cluster spec (--cluster_spec FILE): a JSON tern.v1.ClusterSpec
// (proto/tern/v1/cluster_spec.proto) that tells `tern ps` and `tern worker`
// where the shards are, how many workers the job has and where its TLS
// certificates are, so that every pod of a deployment can share one file.
// Explicit flags and TERN_<FLAG> variables override the spec.
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
// "num_worker" must not silently give one worker), and so are "insecure"
// with "tls_dir". INVALID_ARGUMENT naming `source` (the file name, for
// messages) and the offending field. tls_dir is left as written.
absl::StatusOr<v1::ClusterSpec> ParseClusterSpec(absl::string_view json,
                                                 absl::string_view source);

// Reads and parses the file at `path`, and makes a relative tls_dir
// relative to the folder of `path` (without looking at it: `tern certs`
// loads a spec to create that folder). NOT_FOUND / PERMISSION_DENIED /
// INVALID_ARGUMENT naming the path.
absl::StatusOr<v1::ClusterSpec> LoadClusterSpec(const std::string& path);

// Fills what the spec gives a shard and `explicit_flags` does not name:
// num_shards (= number of shard addresses), num_workers, and listen
// ("0.0.0.0:<port of entry shard_index>": a pod's advertised name need not
// resolve to an address it can bind); from tls_dir, the TLS files of its
// identity (ps-<shard_index>, or lps-<datacenter> for an LPS, mode
// weightgrad or gaia) and ca.pem; insecure, unless TLS files were given.
// --tls_cert and --tls_key are a pair: either keeps both of the folder's
// out. INVALID_ARGUMENT when shard_index is not below the number of shards,
// or when --insecure was given and the spec has a tls_dir; NOT_FOUND /
// INVALID_ARGUMENT naming tls_dir when a file is to come from it and it is
// not a folder (the only look at the file system).
absl::Status ApplyClusterSpec(const v1::ClusterSpec& spec,
                              absl::string_view source,
                              const ExplicitFlags& explicit_flags,
                              server::PsOptions* options);

// Fills what the spec gives a worker and `explicit_flags` does not name:
// ps (the shard addresses), num_workers, and from tls_dir the TLS files of
// worker-<worker_id> and ca.pem, as for a shard. A worker only connects:
// insecure, about accepting plaintext, is not for it.
absl::Status ApplyClusterSpec(const v1::ClusterSpec& spec,
                              absl::string_view source,
                              const ExplicitFlags& explicit_flags,
                              worker::WorkerOptions* options);

}  // namespace tern

#endif  // TERN_TERN_CLUSTER_SPEC_H_

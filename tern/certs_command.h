// `tern certs`: makes a run's CA and one certificate and key per process
// identity (tern/certs.h) in a folder that compose and Kubernetes mount:
//
//   DIR/ca.pem, DIR/ca.key             the run's CA
//   DIR/ps-<i>.pem, DIR/ps-<i>.key     shard i          tern://RUN/ps/i
//   DIR/lps-<d>.pem, ...               data center d    tern://RUN/lps/d
//   DIR/worker-<i>.pem, ...            worker i         tern://RUN/worker/i
//   DIR/global.pem, DIR/global.key     the global server tern://RUN/global/0
//
// Keys are written 0600, certificates 0644; a folder it creates is 0700.
// ca.pem is written last, so a folder holding it is complete. An existing
// file is never replaced without --force.
#ifndef TERN_TERN_CERTS_COMMAND_H_
#define TERN_TERN_CERTS_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags/cli_fwd.h"
#include "tern/certs.h"
#include "tern/v1/cluster_spec.pb.h"

namespace tern {

struct CertsOptions {
  std::string out_dir;
  std::string run_id;
  uint32_t shards = 0;
  uint32_t workers = 0;
  uint32_t datacenters = 0;
  bool global = false;
  int days = 365;
  // Extra DNS names or IP addresses for every leaf.
  std::vector<std::string> hosts;
  std::string cluster_spec;
  bool force = false;

  // Filled after parsing, not flags: whether --shards / --workers were
  // given (a cluster spec fills only what was not), and the host of each
  // shard address in the cluster spec.
  bool shards_given = false;
  bool workers_given = false;
  std::vector<std::string> shard_hosts;
};

// The flags of `tern certs` on `app`, bound to `options` (which must
// outlive the parse). Also TERN_<FLAG> variables, except --force and
// --global (TERN_GLOBAL is `tern ps`'s global server address).
void AddCertsFlags(CLI::App* app, CertsOptions* options);

// Fills from `spec` what the flags did not give: shards (the number of
// shard addresses), workers (num_workers), and each shard's host name.
void ApplyCertsClusterSpec(const v1::ClusterSpec& spec, CertsOptions* options);

// INVALID_ARGUMENT naming the flag: no --out or --run_id, a bad run id or
// --hosts entry, --days < 1, or nothing to issue.
absl::Status ValidateCertsOptions(const CertsOptions& options);

// The host names of `identity` in deploy/: localhost, 127.0.0.1, ::1, its
// compose service name ("ps-0", "global") and, for the servers, its
// Kubernetes name ("tern-ps-0.tern-ps", "tern-global").
std::vector<std::string> DeployHosts(const certs::Identity& identity);

// The leaves to issue, in the order ps, lps, worker, global: each with its
// DeployHosts, its shard host from the cluster spec, and --hosts.
std::vector<certs::LeafSpec> PlanLeaves(const CertsOptions& options);

// Makes the CA and every leaf of PlanLeaves, then writes them to
// options.out_dir (created 0700 when missing). ALREADY_EXISTS naming the
// file when one of them is there and !options.force, before anything is
// generated or written; errors from the file system or OpenSSL name the
// file or the step.
absl::Status WriteClusterCerts(const CertsOptions& options);

// The whole command: loads --cluster_spec, validates, writes, prints what
// it wrote. The exit code (common/process/exit_codes.h).
int RunCerts(CertsOptions options);

}  // namespace tern

#endif  // TERN_TERN_CERTS_COMMAND_H_

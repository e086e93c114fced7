#include "tern/certs_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flags/flags.h"
#include "common/net/address.h"
#include "common/process/exit_codes.h"
#include "tern/cluster_spec.h"

namespace tern {
namespace {

using certs::Identity;
using certs::KeyAndCert;
using certs::LeafSpec;
using certs::Role;

constexpr mode_t kDirMode = 0700;
constexpr mode_t kKeyMode = 0600;
constexpr mode_t kCertMode = 0644;

// One file to write: its path, mode and contents.
struct OutputFile {
  std::string path;
  mode_t mode;
  std::string contents;
};

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int error = errno;
  return absl::Status(
      error == EACCES || error == EPERM ? absl::StatusCode::kPermissionDenied
                                        : absl::StatusCode::kFailedPrecondition,
      absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

// Creates `dir` (its parent must exist) with mode kDirMode, whatever the
// umask; a folder already there is used as it is.
absl::Status MakeOutputDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), kDirMode) == 0) {
    if (::chmod(dir.c_str(), kDirMode) != 0) {
      return ErrnoError("cannot set the mode of", dir);
    }
    return absl::OkStatus();
  }
  if (errno != EEXIST) return ErrnoError("cannot create", dir);
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0) return ErrnoError("cannot stat", dir);
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--out ", dir, " exists and is not a folder"));
  }
  return absl::OkStatus();
}

// Writes `file`, replacing what is there. The mode is set before the
// contents, so a key is never readable by others, even for a moment, and
// never follows a symbolic link planted at its path.
absl::Status WriteOutputFile(const OutputFile& file) {
  const int fd =
      ::open(file.path.c_str(),
             O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, file.mode);
  if (fd < 0) return ErrnoError("cannot open", file.path);
  absl::Status status;
  if (::fchmod(fd, file.mode) != 0) {
    status = ErrnoError("cannot set the mode of", file.path);
  }
  size_t written = 0;
  while (status.ok() && written < file.contents.size()) {
    const ssize_t n = ::write(fd, file.contents.data() + written,
                              file.contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = ErrnoError("cannot write", file.path);
    if (n > 0) written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && status.ok()) {
    status = ErrnoError("cannot close", file.path);
  }
  return status;
}

// ALREADY_EXISTS for the first of `paths` that exists (or is a dangling
// link).
absl::Status RefuseExisting(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    struct stat info;
    if (::lstat(path.c_str(), &info) == 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          path,
          " already exists; pass --force to replace the CA and every "
          "certificate in the folder"));
    }
  }
  return absl::OkStatus();
}

// The CA's files first, as a refusal should name them first.
std::vector<std::string> OutputPaths(const std::string& dir,
                                     const std::vector<LeafSpec>& leaves) {
  std::vector<std::string> stems = {"ca"};
  for (const LeafSpec& spec : leaves) {
    stems.push_back(certs::IdentityName(spec.identity));
  }
  std::vector<std::string> paths;
  for (const std::string& stem : stems) {
    paths.push_back(absl::StrCat(dir, "/", stem, ".pem"));
    paths.push_back(absl::StrCat(dir, "/", stem, ".key"));
  }
  return paths;
}

absl::StatusOr<std::vector<OutputFile>> PemFiles(const KeyAndCert& pair,
                                                 const std::string& stem) {
  absl::StatusOr<std::string> cert = certs::CertToPem(*pair.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = certs::KeyToPem(*pair.key);
  if (!key.ok()) return key.status();
  std::vector<OutputFile> files;
  files.push_back({absl::StrCat(stem, ".key"), kKeyMode, *std::move(key)});
  files.push_back({absl::StrCat(stem, ".pem"), kCertMode, *std::move(cert)});
  return files;
}

// Every file, in writing order: the leaves, then ca.key, then ca.pem.
absl::StatusOr<std::vector<OutputFile>> MakeFiles(
    const CertsOptions& options, const std::vector<LeafSpec>& leaves) {
  absl::StatusOr<KeyAndCert> ca = certs::MakeCa(options.run_id, options.days);
  if (!ca.ok()) return ca.status();
  std::vector<OutputFile> files;
  for (const LeafSpec& spec : leaves) {
    absl::StatusOr<KeyAndCert> leaf = certs::IssueLeaf(*ca, spec);
    if (!leaf.ok()) return leaf.status();
    absl::StatusOr<std::vector<OutputFile>> pems = PemFiles(
        *leaf,
        absl::StrCat(options.out_dir, "/", certs::IdentityName(spec.identity)));
    if (!pems.ok()) return pems.status();
    for (OutputFile& file : *pems) files.push_back(std::move(file));
  }
  absl::StatusOr<std::vector<OutputFile>> ca_pems =
      PemFiles(*ca, absl::StrCat(options.out_dir, "/ca"));
  if (!ca_pems.ok()) return ca_pems.status();
  for (OutputFile& file : *ca_pems) files.push_back(std::move(file));
  return files;
}

void AddCountFlags(CLI::App* app, CertsOptions* options) {
  CLI::Option* shards =
      flags::Flag(
          app, "shards", &options->shards,
          "parameter-server shards: ps-<i>.pem for i in [0, N) (default: the "
          "cluster spec's, else 0)")
          ->check(CLI::Range(0u, 1024u));
  CLI::Option* workers =
      flags::Flag(
          app, "workers", &options->workers,
          "workers: worker-<i>.pem for i in [0, N) (default: the cluster "
          "spec's, else 0)")
          ->check(CLI::Range(0u, 16384u));
  flags::Flag(app, "datacenters", &options->datacenters,
              "K data centers of a geo run: lps-<d>.pem for the local "
              "parameter server of each d in [0, K)")
      ->check(CLI::Range(0u, 256u));
  // Not from the environment: TERN_GLOBAL is `tern ps`'s address of the
  // global server, set in every LPS container.
  app->add_flag("--global", options->global,
                "also global.pem, for the global server (`tern global`)");
  app->callback([options, shards, workers] {
    options->shards_given = shards->count() > 0;
    options->workers_given = workers->count() > 0;
  });
}

}  // namespace

void AddCertsFlags(CLI::App* app, CertsOptions* options) {
  flags::Flag(app, "out", &options->out_dir,
              "folder for the files, created 0700 if missing (its parent "
              "must exist)")
      ->required();
  flags::Flag(app, "run_id", &options->run_id,
              "the run the certificates are for: every leaf names "
              "tern://<run_id>/<role>/<id> (letters, digits, '.', '_', '-')")
      ->required();
  AddCountFlags(app, options);
  flags::Flag(app, "days", &options->days,
              "days the CA and the certificates stay valid")
      ->check(CLI::Range(1, 36500));
  flags::Flag(app, "hosts", &options->hosts,
              "comma-separated DNS names or IP addresses added to every "
              "certificate, besides localhost, 127.0.0.1, ::1 and the "
              "compose and Kubernetes names of deploy/")
      ->delimiter(',');
  flags::Flag(app, "cluster_spec", &options->cluster_spec,
              "JSON cluster spec (as for tern ps): its shard count, worker "
              "count and each shard's host name; explicit flags override it");
  // Not from the environment: a stray TERN_FORCE must not replace a CA.
  app->add_flag("--force", options->force,
                "replace an existing CA and certificates in --out (every "
                "certificate issued by the old CA stops verifying)");
}

void ApplyCertsClusterSpec(const v1::ClusterSpec& spec, CertsOptions* options) {
  if (!options->shards_given) options->shards = spec.shards_size();
  if (!options->workers_given) options->workers = spec.num_workers();
  options->shard_hosts.clear();
  for (const std::string& address : spec.shards()) {
    options->shard_hosts.emplace_back(net::HostOfAddress(address));
  }
}

absl::Status ValidateCertsOptions(const CertsOptions& options) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("--out must name a folder");
  }
  if (absl::Status status = certs::ValidateRunId(options.run_id);
      !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--run_id: ", status.message()));
  }
  if (options.days < 1) {
    return absl::InvalidArgumentError("--days must be at least 1");
  }
  for (const std::string& host : options.hosts) {
    if (absl::Status status = certs::ValidateHost(host); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hosts: ", status.message()));
    }
  }
  if (options.shards == 0 && options.workers == 0 && options.datacenters == 0 &&
      !options.global) {
    return absl::InvalidArgumentError(
        "nothing to issue: give --shards, --workers, --datacenters, "
        "--global or a --cluster_spec");
  }
  return absl::OkStatus();
}

std::vector<std::string> DeployHosts(const Identity& identity) {
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1",
                                    certs::IdentityName(identity)};
  switch (identity.role) {
    case Role::kPs:  // pod i of the StatefulSet tern-ps (deploy/k8s/base)
      hosts.push_back(absl::StrCat("tern-ps-", identity.id, ".tern-ps"));
      break;
    case Role::kLps:  // each region's LPS is pod 0 of its own tern-ps
      hosts.push_back("tern-ps-0.tern-ps");
      break;
    case Role::kGlobal:  // the Service tern-global (deploy/k8s/geo/global)
      hosts.push_back("tern-global");
      break;
    case Role::kWorker:  // a client only: Job pods have no stable name
      break;
  }
  return hosts;
}

std::vector<LeafSpec> PlanLeaves(const CertsOptions& options) {
  std::vector<LeafSpec> leaves;
  auto add = [&](Role role, uint32_t id) {
    LeafSpec spec;
    spec.identity = Identity{options.run_id, role, id};
    spec.hosts = DeployHosts(spec.identity);
    if (role == Role::kPs && id < options.shard_hosts.size()) {
      spec.hosts.push_back(options.shard_hosts[id]);
    }
    spec.hosts.insert(spec.hosts.end(), options.hosts.begin(),
                      options.hosts.end());
    spec.days = options.days;
    leaves.push_back(std::move(spec));
  };
  for (uint32_t i = 0; i < options.shards; ++i) add(Role::kPs, i);
  for (uint32_t d = 0; d < options.datacenters; ++d) add(Role::kLps, d);
  for (uint32_t i = 0; i < options.workers; ++i) add(Role::kWorker, i);
  if (options.global) add(Role::kGlobal, 0);
  return leaves;
}

absl::Status WriteClusterCerts(const CertsOptions& options) {
  const std::vector<LeafSpec> leaves = PlanLeaves(options);
  if (absl::Status status = MakeOutputDir(options.out_dir); !status.ok()) {
    return status;
  }
  if (!options.force) {
    if (absl::Status status =
            RefuseExisting(OutputPaths(options.out_dir, leaves));
        !status.ok()) {
      return status;
    }
  }
  absl::StatusOr<std::vector<OutputFile>> files = MakeFiles(options, leaves);
  if (!files.ok()) return files.status();
  for (const OutputFile& file : *files) {
    if (absl::Status status = WriteOutputFile(file); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

int RunCerts(CertsOptions options) {
  absl::Status status;
  if (!options.cluster_spec.empty()) {
    absl::StatusOr<v1::ClusterSpec> spec =
        LoadClusterSpec(options.cluster_spec);
    if (spec.ok()) ApplyCertsClusterSpec(*spec, &options);
    status = spec.status();
  }
  if (status.ok()) status = ValidateCertsOptions(options);
  if (status.ok()) status = WriteClusterCerts(options);
  if (!status.ok()) {
    std::fprintf(stderr, "tern certs: error: %s\n",
                 std::string(status.message()).c_str());
    return process::ExitCodeFor(status);
  }
  const std::vector<LeafSpec> leaves = PlanLeaves(options);
  std::vector<std::string> names;
  for (const LeafSpec& spec : leaves) {
    names.push_back(certs::IdentityName(spec.identity));
  }
  std::printf(
      "tern certs: wrote ca.pem, ca.key and %zu certificates for run "
      "'%s' to %s: %s\n",
      leaves.size(), options.run_id.c_str(), options.out_dir.c_str(),
      absl::StrJoin(names, ", ").c_str());
  return process::kExitOk;
}

}  // namespace tern

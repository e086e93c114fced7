#include "server/ps_flags.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/flags/flags.h"
#include "common/net/plaintext.h"
#include "common/net/tls_flags.h"
#include "common/process/server_role_flags.h"
#include "common/status_macros.h"
#include "server/worker_loss.h"

namespace tern::server {
namespace {

using flags::EnumName;
using flags::FinitePositive;
using flags::Flag;
using flags::IsHostPort;

std::string RunModeNames() { return "terngrad, weightgrad, gaia"; }

absl::StatusOr<RunMode> ParseRunMode(absl::string_view name) {
  for (RunMode mode :
       {RunMode::kTernGrad, RunMode::kWeightGrad, RunMode::kGaia}) {
    if (name == RunModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not one of ", RunModeNames()));
}

std::string WeightCodecNames() { return "ternary, int8, fp32"; }

// The empty name is the mode's default.
absl::StatusOr<WeightCodec> ParseWeightCodec(absl::string_view name) {
  if (name.empty()) return WeightCodec::kModeDefault;
  for (WeightCodec codec :
       {WeightCodec::kTernary, WeightCodec::kInt8, WeightCodec::kFp32}) {
    if (name == WeightCodecName(codec)) return codec;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not one of ", WeightCodecNames()));
}

}  // namespace

const char* WeightCodecName(WeightCodec codec) {
  switch (codec) {
    case WeightCodec::kModeDefault:
      return "";
    case WeightCodec::kTernary:
      return "ternary";
    case WeightCodec::kInt8:
      return "int8";
    case WeightCodec::kFp32:
      return "fp32";
  }
  return "unknown";
}

WeightCodec EffectiveWeightCodec(const PsOptions& options) {
  if (options.weight_codec != WeightCodec::kModeDefault) {
    return options.weight_codec;
  }
  return options.mode == RunMode::kGaia ? WeightCodec::kFp32
                                        : WeightCodec::kTernary;
}

namespace {

// The shard this server is among the workers'.
void AddShardFlags(CLI::App* app, PsOptions* o) {
  constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
  Flag(app, "shard_index", &o->shard_index,
       "this shard's index in [0, num_shards)");
  Flag(app, "num_shards", &o->num_shards, "number of parameter-server shards")
      ->check(CLI::Range(1u, kU32Max));
  Flag(app, "num_workers", &o->num_workers, "number of workers in the job")
      ->check(CLI::Range(1u, kU32Max));
}

// How long a step waits for its workers, and what a lost worker means.
void AddWaitFlags(CLI::App* app, PsOptions* o) {
  Flag(app, "barrier_timeout_s", &o->barrier_timeout_s,
       "how long a join, scaler-sharing or push-pull call waits for the last "
       "worker before it fails naming the missing ones; keep it below the "
       "workers' --rpc_timeout_s")
      ->check(FinitePositive());
  Flag(app, "join_timeout_s", &o->join_timeout_s,
       "how long the shard waits for all workers to join before it exits "
       "(a transient failure: exit code 128)")
      ->check(FinitePositive());
  Flag(app, "straggler_warn_s", &o->straggler_warn_s,
       "name the workers a step still waits for once it has waited this long "
       "since the first worker arrived, before any timeout (0: never)")
      ->check(CLI::NonNegativeNumber);
  Flag(app, "on_worker_loss", &o->on_worker_loss,
       "terngrad: what the shard does once a step has waited "
       "--worker_loss_timeout_s for a worker that does not come: stop (the "
       "run fails naming the worker and the step; workers exit 1) or shrink "
       "(the others go on, averaging over the workers that push; the lost "
       "one is let in again at a step boundary when it comes back from its "
       "checkpoint, see --catch_up_mb)")
      ->check(CLI::IsMember({"stop", "shrink"}));
  Flag(app, "catch_up_mb", &o->catch_up_mb,
       "terngrad: keep the answers of the latest completed steps, up to "
       "this many MiB (at least the last step's), so that a worker coming "
       "back from a checkpoint that many steps old catches up on them: a "
       "restarted worker, or one dropped by shrink (0: the last step only)")
      ->check(CLI::NonNegativeNumber);
  Flag(app, "worker_loss_timeout_s", &o->worker_loss_timeout_s,
       "how long a step waits, from its first worker's call, for the others "
       "before --on_worker_loss applies (0: --barrier_timeout_s); a worker "
       "that restarts from its checkpoint must be back within it")
      ->check(CLI::NonNegativeNumber);
}

// The flags every server role has, with the shard's and the LPS's help.
void AddServingFlags(CLI::App* app, PsOptions* o) {
  process::AddServerRoleFlags(
      app, o,
      {.report_file = "an LPS writes its report here as it stops: steps, "
                      "checksum, WAN bytes (JSON; empty: none)",
       .max_message_mb = "largest message sent or received, in MiB; the "
                         "shard's part of the model must fit in fp32",
       .state_dir =
           "keep the server's state in this directory and resume from it "
           "when restarted with the same flags, so that a killed server "
           "does not end the run; terngrad: shard-<index>.state, rewritten "
           "at each step (the run resumes bit-identical); weightgrad/gaia: "
           "lps.state, written with a round every --checkpoint_every steps "
           "(the workers rejoin and redo the steps since); empty: none",
       .state_sync = "with --state_dir: flush each state write to disk "
                     "(survives a machine crash, not only a killed process; "
                     "costs a disk flush per step)",
       .log_level = "trace, debug (one line per step), info, warn, error, "
                    "critical or off"});
  Flag(app, "checkpoint_every", &o->checkpoint_every,
       "weightgrad/gaia with --state_dir: write the LPS's state with the "
       "first round built at least this many local steps after the last "
       "write (0: with every round, --sync_every), and at the end; without "
       "--global, every this many steps (0: every step)");
}

// weightgrad/gaia: the LPS and its rounds with the global server.
void AddGeoFlags(CLI::App* app, PsOptions* o) {
  constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
  Flag(app, "mode", &o->mode,
       "terngrad: a TernGrad shard (DESIGN section 3); weightgrad: a "
       "WeightGrad local parameter server (LPS) of one data center, which "
       "applies each worker's ternary gradient at once and answers with its "
       "weights; gaia: the same with fp32 gradients and Gaia's element-wise "
       "filter between data centers (server/WEIGHTGRAD.md)")
      ->transform(EnumName<RunMode>(ParseRunMode, &RunModeNames,
                                    "{" + RunModeNames() + "}"))
      ->default_str(RunModeName(o->mode));
  Flag(app, "global", &o->global,
       "weightgrad/gaia: host:port of `tern global`; empty: a single data "
       "center, no rounds");
  Flag(app, "datacenter", &o->datacenter,
       "weightgrad/gaia: this data center's index in [0, num_datacenters)");
  Flag(app, "num_datacenters", &o->num_datacenters,
       "weightgrad/gaia: K, the data centers the global server expects")
      ->check(CLI::Range(1u, kU32Max));
  Flag(app, "sync_every", &o->sync_every,
       "weightgrad/gaia: local steps per round with the global server")
      ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
  Flag(app, "sync_timeout_s", &o->sync_timeout_s,
       "weightgrad/gaia: how long the global server may leave a round "
       "unanswered before the LPS holds its workers' answers (at most "
       "--barrier_timeout_s each)")
      ->check(FinitePositive());
  Flag(app, "g_thresh", &o->g_thresh,
       "weightgrad: the significance a chunk's accumulated update needs to "
       "be sent, in [0, 1] (net displacement over path length); 0: the "
       "paper's dynamic threshold")
      ->check(CLI::Range(0.0, 1.0));
  Flag(app, "steps_per_epoch", &o->steps_per_epoch,
       "weightgrad: local steps between rescales of the dynamic threshold "
       "(Appendix A.2); 0: from the workers' data set, batch and slices");
  Flag(app, "weight_codec", &o->weight_codec,
       "weightgrad/gaia: how the LPS sends its weights to the workers: "
       "ternary (2 bits per weight), int8 or fp32; empty: ternary for "
       "weightgrad, fp32 for gaia")
      ->transform(EnumName<WeightCodec>(ParseWeightCodec, &WeightCodecNames,
                                        "{" + WeightCodecNames() + "}"))
      ->default_str(WeightCodecName(o->weight_codec));
}

}  // namespace

void AddPsFlags(CLI::App* app, PsOptions* o) {
  AddServingFlags(app, o);
  AddShardFlags(app, o);
  AddWaitFlags(app, o);
  AddGeoFlags(app, o);
}

namespace {

// The checks of the flags every --mode has.
absl::Status ValidateServingOptions(const PsOptions& o) {
  if (!ParseRunMode(RunModeName(o.mode)).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode: ", static_cast<uint32_t>(o.mode),
                     " is not one of ", RunModeNames()));
  }
  // An LPS with --global connects to the global server too.
  TERN_RETURN_IF_ERROR(process::ValidateServerRoleOptions(
      o, o.mode != RunMode::kTernGrad && !o.global.empty()
             ? net::TlsUse::kServeAndConnect
             : net::TlsUse::kServe));
  if (o.num_shards == 0) {
    return absl::InvalidArgumentError("--num_shards must be at least 1");
  }
  if (o.shard_index >= o.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard_index=", o.shard_index,
                     " is not below --num_shards=", o.num_shards));
  }
  if (o.num_workers == 0) {
    return absl::InvalidArgumentError("--num_workers must be at least 1");
  }
  TERN_RETURN_IF_ERROR(
      flags::CheckFinitePositive("barrier_timeout_s", o.barrier_timeout_s));
  if (!ParseWorkerLossPolicy(o.on_worker_loss).ok()) {
    return ParseWorkerLossPolicy(o.on_worker_loss).status();
  }
  TERN_RETURN_IF_ERROR(flags::CheckFiniteNonNegative("worker_loss_timeout_s",
                                                     o.worker_loss_timeout_s));
  if (o.worker_loss_timeout_s > o.barrier_timeout_s) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker_loss_timeout_s=", o.worker_loss_timeout_s,
        " is above --barrier_timeout_s=", o.barrier_timeout_s,
        ": the waiting calls would expire before a worker counts as lost"));
  }
  TERN_RETURN_IF_ERROR(
      flags::CheckFiniteNonNegative("straggler_warn_s", o.straggler_warn_s));
  return flags::CheckFinitePositive("join_timeout_s", o.join_timeout_s);
}

// The checks of a local parameter server's own flags (--mode=weightgrad or
// gaia).
absl::Status ValidateLpsOptions(const PsOptions& o) {
  if (o.on_worker_loss != "stop") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--on_worker_loss=", o.on_worker_loss,
        " with --mode=", RunModeName(o.mode),
        ": only a TernGrad shard drops lost workers (an LPS has no step "
        "barrier to wait at)"));
  }
  if (o.num_shards != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num_shards=", o.num_shards, " with --mode=", RunModeName(o.mode),
        ": a data center has one LPS shard (sharding the LPS is not "
        "supported yet)"));
  }
  if (!o.global.empty() && !IsHostPort(o.global)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global: '", o.global, "' is not of the form host:port"));
  }
  if (o.num_datacenters == 0 || o.datacenter >= o.num_datacenters) {
    return absl::InvalidArgumentError(
        absl::StrCat("--datacenter=", o.datacenter,
                     " is not below --num_datacenters=", o.num_datacenters));
  }
  if (o.global.empty() && o.num_datacenters > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_datacenters=", o.num_datacenters,
                     " needs --global (the global server's host:port)"));
  }
  if (o.sync_every == 0) {
    return absl::InvalidArgumentError("--sync_every must be at least 1");
  }
  TERN_RETURN_IF_ERROR(
      flags::CheckFinitePositive("sync_timeout_s", o.sync_timeout_s));
  if (!std::isfinite(o.g_thresh) || o.g_thresh < 0 || o.g_thresh > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--g_thresh=", o.g_thresh, " is not in [0, 1]"));
  }
  if (!ParseWeightCodec(WeightCodecName(o.weight_codec)).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--weight_codec: ", static_cast<uint32_t>(o.weight_codec),
                     " is not one of ", WeightCodecNames()));
  }
  // The WAN link: plaintext needs --insecure here and at the global server.
  if (o.global.empty()) return absl::OkStatus();
  return net::CheckPlaintext(net::SecurityFromFlags(o.tls, o.insecure),
                             o.global, "connect to the global server at");
}

}  // namespace

absl::Status ValidatePsOptions(const PsOptions& o) {
  TERN_RETURN_IF_ERROR(ValidateServingOptions(o));
  if (o.checkpoint_every > 0 &&
      (o.mode == RunMode::kTernGrad || o.state_dir.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every=", o.checkpoint_every,
        o.mode == RunMode::kTernGrad
            ? " with --mode=terngrad: a TernGrad shard writes its state at "
              "every step"
            : " without --state_dir: there is nowhere to write the state"));
  }
  if (o.mode == RunMode::kTernGrad) return absl::OkStatus();
  return ValidateLpsOptions(o);
}

}  // namespace tern::server

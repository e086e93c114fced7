#include "tern/child_supervisor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "tern/geo_plan.h"

namespace tern {
namespace {

// The children run this very binary, whatever its name or path now.
constexpr char kSelfExe[] = "/proc/self/exe";

}  // namespace

int ExitCodeFor(const ChildExit& exit) {
  if (exit.signaled()) return process::ExitCodeForSignal(exit.code_or_signal());
  const int code = exit.code_or_signal();
  if (code == process::kExitOk) return process::kExitOk;
  return code < process::kExitTransient ? process::kExitPermanent : code;
}

absl::StatusOr<std::unique_ptr<ChildSupervisor>> ChildSupervisor::Create(
    SupervisorConfig config, const LaunchOptions* options, Console* console,
    LaunchOutcome* outcome) {
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Create(
      [console](const std::string& child, absl::string_view line) {
        console->ChildLine(child, line);
      });
  if (!group.ok()) return group.status();
  return std::unique_ptr<ChildSupervisor>(new ChildSupervisor(
      std::move(config), options, console, outcome, *std::move(group)));
}

std::string ChildSupervisor::LogOf(absl::string_view name) const {
  return absl::StrCat(config_.out_dir, "/",
                      absl::StrReplaceAll(name, {{"/", "-"}}), ".log");
}

std::optional<size_t> ChildSupervisor::Spawn(std::string name, std::string path,
                                             std::vector<std::string> argv,
                                             ChildRole role) {
  ChildSpec spec;
  spec.name = std::move(name);
  spec.path = std::move(path);
  spec.argv = std::move(argv);
  // The children get their whole configuration as flags; a cluster spec
  // in the environment would only contradict it, and a --save_model there
  // would have every worker write the one file launch gives worker 0.
  spec.unset_env = {"TERN_CLUSTER_SPEC", "TERN_SAVE_MODEL"};
  spec.log_path = LogOf(spec.name);
  absl::StatusOr<size_t> index = group_->Spawn(spec);
  if (!index.ok()) {
    outcome_.Fail(spec.name, std::string(index.status().message()),
                  process::kExitStartFailure);
    return std::nullopt;
  }
  roles_.push_back(role);
  return *index;
}

std::optional<size_t> ChildSupervisor::SpawnTern(
    const std::string& name, absl::string_view region,
    const std::vector<std::string>& given, ChildRole role) {
  std::vector<std::string> args = given;
  for (std::string& arg : metrics_.ArgsFor(name)) args.push_back(arg);
  if (absl::Status written = metrics_.WriteScrapeConfig(); !written.ok()) {
    console_.Note(std::string(written.message()));
  }
  if (!config_.wan_script.empty()) {
    return Spawn(
        name, config_.wan_script,
        WanExecArgv(config_.wan_script, options_, region, config_.self, args),
        role);
  }
  std::vector<std::string> argv = {config_.self};
  argv.insert(argv.end(), args.begin(), args.end());
  return Spawn(name, kSelfExe, std::move(argv), role);
}

std::optional<ChildExit> ChildSupervisor::RunTool(const std::string& name,
                                                  std::vector<std::string> argv,
                                                  absl::Duration limit,
                                                  bool interruptible) {
  std::string path = argv.front();
  std::optional<size_t> index =
      Spawn(name, std::move(path), std::move(argv), ChildRole::kTool);
  if (!index.has_value()) return std::nullopt;
  const absl::Time deadline = absl::Now() + limit;
  while (group_->running(*index)) {
    group_->Poll(absl::Milliseconds(100));
    if ((interruptible && Interrupted()) || absl::Now() > deadline) {
      group_->Stop({*index}, config_.stop_grace);
      break;
    }
  }
  CheckExits();  // the tool's own exit is skipped there
  return group_->exit(*index);
}

void ChildSupervisor::Poll(absl::Duration timeout) {
  group_->Poll(timeout);
  CheckExits();
}

void ChildSupervisor::CheckExits() {
  for (size_t i : group_->TakeExited()) {
    if (roles_[i] == ChildRole::kTool) continue;
    const ChildExit& exit = *group_->exit(i);
    if (roles_[i] == ChildRole::kWorker && exit.success()) continue;
    const std::string why =
        exit.success() ? "exited before the workers finished" : exit.Describe();
    if (outcome_.ok()) ReportFailure(i, why);
    outcome_.Fail(
        group_->name(i), why,
        exit.success() ? process::kExitStartFailure : ExitCodeFor(exit));
  }
}

void ChildSupervisor::ReportFailure(size_t child, const std::string& why) {
  const std::string& name = group_->name(child);
  console_.Note(absl::StrCat(name, " failed: ", why,
                             ". Its last lines (all in ", LogOf(name), "):"));
  for (const std::string& line : group_->LastLines(child)) {
    console_.Note(absl::StrCat("  | ", line));
  }
}

bool ChildSupervisor::Interrupted() {
  const int signal = group_->interrupt_signal();
  if (signal == 0) return false;
  outcome_.Interrupt(signal);
  return true;
}

bool ChildSupervisor::AnyRunning(const std::vector<size_t>& children) const {
  return std::any_of(children.begin(), children.end(),
                     [this](size_t i) { return group_->running(i); });
}

void ChildSupervisor::Stop(const std::vector<size_t>& children) {
  group_->Stop(children, config_.stop_grace);
  group_->TakeExited();
}

void ChildSupervisor::StopAll() {
  group_->StopAll(config_.stop_grace);
  group_->TakeExited();
}

std::vector<std::pair<std::string, std::string>> ChildSupervisor::Ends() const {
  std::vector<std::pair<std::string, std::string>> ends;
  for (size_t i = 0; i < group_->size(); ++i) {
    ends.emplace_back(group_->name(i), group_->exit(i).has_value()
                                           ? group_->exit(i)->Describe()
                                           : std::string("still running"));
  }
  return ends;
}

}  // namespace tern

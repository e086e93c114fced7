// The deploy/wan/tern-wan command lines of an emulated WAN and where the
// script lies (FindWanScript).
#include "tern/geo_plan.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tern {
namespace {

bool IsExecutableFile(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string Absolute(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return path;
  return absolute.lexically_normal().string();
}

}  // namespace

std::vector<std::string> WanUpArgv(const std::string& script,
                                   const LaunchOptions& options) {
  std::vector<std::string> argv = {script, "up", "--datacenters",
                                   absl::StrCat(options.geo.datacenters)};
  if (options.geo.wan_mbit > 0) {
    argv.push_back("--wan_mbit");
    argv.push_back(absl::StrCat(options.geo.wan_mbit));
  }
  argv.push_back("--prefix");
  argv.push_back(options.geo.wan_prefix);
  return argv;
}

std::vector<std::string> WanDownArgv(const std::string& script,
                                     const LaunchOptions& options) {
  return {script, "down", "--prefix", options.geo.wan_prefix};
}

std::vector<std::string> WanExecArgv(const std::string& script,
                                     const LaunchOptions& options,
                                     absl::string_view region,
                                     const std::string& program,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      script, "exec", std::string(region), "--prefix", options.geo.wan_prefix,
      "--",   program};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

absl::StatusOr<std::string> FindWanScript(const std::string& flag,
                                          const std::string& self_exe,
                                          const std::string& cwd) {
  if (!flag.empty()) {
    if (IsExecutableFile(flag)) return Absolute(flag);
    return absl::InvalidArgumentError(
        absl::StrCat("--wan_script: '", flag, "' is not an executable file"));
  }
  const std::filesystem::path self(self_exe);
  const std::vector<std::string> candidates = {
      absl::StrCat(self_exe, ".runfiles/tern/deploy/wan/tern-wan"),
      (self.parent_path() / "../../../../deploy/wan/tern-wan")
          .lexically_normal()
          .string(),
      (std::filesystem::path(cwd) / "deploy/wan/tern-wan").string()};
  for (const std::string& candidate : candidates) {
    if (IsExecutableFile(candidate)) return Absolute(candidate);
  }
  return absl::NotFoundError(absl::StrCat(
      "deploy/wan/tern-wan not found (looked in ",
      absl::StrJoin(candidates, ", "),
      "); pass --wan_script PATH or run from the repository root"));
}

}  // namespace tern

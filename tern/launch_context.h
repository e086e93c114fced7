// What the parts of one `tern launch` share (tern/launch.cc sets it up;
// tern/server_startup.h, tern/launch_report.h borrow it).
#ifndef TERN_TERN_LAUNCH_CONTEXT_H_
#define TERN_TERN_LAUNCH_CONTEXT_H_

#include <string>

#include "tern/child_supervisor.h"
#include "tern/console.h"
#include "tern/geo_plan.h"
#include "tern/launch_options.h"
#include "tern/run_summary.h"

namespace tern {

// Every pointer borrows; RunLaunch owns what they point to, for the whole
// run.
struct LaunchContext {
  const LaunchOptions* options = nullptr;  // resolved (ResolveLaunchOptions)
  GeoMode mode = GeoMode::kNone;  // options->geo.mode
  std::string out_dir;
  std::string wan_script;  // "" unless --emulate_wan
  std::string tls_dir;     // OUT/tls under --tls, "" otherwise
  Console* console = nullptr;
  LaunchOutcome* outcome = nullptr;
  ChildSupervisor* children = nullptr;

  bool geo() const { return mode != GeoMode::kNone; }
  bool wan() const { return options->geo.emulate_wan; }
};

}  // namespace tern

#endif  // TERN_TERN_LAUNCH_CONTEXT_H_

// --geo of `tern launch`: which of the four geo-distributed ways a run
// trains (DESIGN.md section 4; tern/geo_plan.h builds their processes).
// Parsed once, when the flags are read (tern/launch_flags.cc); the launch
// only sees the enum.
#ifndef TERN_TERN_GEO_MODE_H_
#define TERN_TERN_GEO_MODE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tern {

enum class GeoMode {
  // Not a geo run: a plain local cluster.
  kNone,
  // fp32 synchronous: one set of shards in the GS's region for all K*W
  // workers (the TernGrad protocol with --codec=fp32).
  kBaseline,
  // The same with --codec=terngrad.
  kTerngrad,
  // `tern global` + one LPS per data center (`tern ps --mode=gaia`).
  kGaia,
  // `tern global` + one LPS per data center (`tern ps --mode=weightgrad`).
  kWeightgrad,
};

// "baseline", "terngrad", "gaia", "weightgrad": the --geo value of `mode`
// (also the --mode of the LPSs and their workers for gaia and weightgrad);
// "" for kNone and for a value that is no enumerator.
absl::string_view GeoModeName(GeoMode mode);

// "baseline, terngrad, gaia, weightgrad": every name ParseGeoMode takes
// besides "".
std::string GeoModeNames();

// The mode --geo=`text` names; "" is kNone. INVALID_ARGUMENT naming --geo
// and listing GeoModeNames() otherwise (names are case-sensitive).
absl::StatusOr<GeoMode> ParseGeoMode(absl::string_view text);

// Whether `mode` is one of the enumerators (options filled by code, not by
// the flags, can hold any value of the underlying type).
bool IsKnownGeoMode(GeoMode mode);

// gaia and weightgrad: a global server and one LPS per data center.
bool UsesLps(GeoMode mode);

}  // namespace tern

#endif  // TERN_TERN_GEO_MODE_H_

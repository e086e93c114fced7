#include "tern/geo_mode.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tern {
namespace {

// The geo modes, in the order --help lists them (kNone is "").
constexpr GeoMode kGeoModes[] = {GeoMode::kBaseline, GeoMode::kTerngrad,
                                 GeoMode::kGaia, GeoMode::kWeightgrad};

}  // namespace

absl::string_view GeoModeName(GeoMode mode) {
  switch (mode) {
    case GeoMode::kBaseline:
      return "baseline";
    case GeoMode::kTerngrad:
      return "terngrad";
    case GeoMode::kGaia:
      return "gaia";
    case GeoMode::kWeightgrad:
      return "weightgrad";
    case GeoMode::kNone:
      break;
  }
  return "";
}

std::string GeoModeNames() {
  std::vector<absl::string_view> names;
  for (const GeoMode mode : kGeoModes) names.push_back(GeoModeName(mode));
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<GeoMode> ParseGeoMode(absl::string_view text) {
  if (text.empty()) return GeoMode::kNone;
  for (const GeoMode mode : kGeoModes) {
    if (text == GeoModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--geo: '", text, "' is not one of ", GeoModeNames()));
}

bool IsKnownGeoMode(GeoMode mode) {
  if (mode == GeoMode::kNone) return true;
  for (const GeoMode known : kGeoModes) {
    if (mode == known) return true;
  }
  return false;
}

bool UsesLps(GeoMode mode) {
  return mode == GeoMode::kGaia || mode == GeoMode::kWeightgrad;
}

}  // namespace tern

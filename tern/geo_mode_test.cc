#include "tern/geo_mode.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::HasSubstr;

TEST(ParseGeoModeTest, KnownModesAndEmpty) {
  EXPECT_EQ(*ParseGeoMode(""), GeoMode::kNone);
  EXPECT_EQ(*ParseGeoMode("baseline"), GeoMode::kBaseline);
  EXPECT_EQ(*ParseGeoMode("terngrad"), GeoMode::kTerngrad);
  EXPECT_EQ(*ParseGeoMode("gaia"), GeoMode::kGaia);
  EXPECT_EQ(*ParseGeoMode("weightgrad"), GeoMode::kWeightgrad);
}

TEST(ParseGeoModeTest, UnknownNamesNameTheFlagAndTheChoices) {
  for (const char* bad : {"Gaia", "gaia2", " baseline", "none"}) {
    SCOPED_TRACE(bad);
    const absl::StatusOr<GeoMode> mode = ParseGeoMode(bad);
    EXPECT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(mode.status().message(), HasSubstr("--geo"));
    EXPECT_THAT(mode.status().message(),
                HasSubstr("baseline, terngrad, gaia, weightgrad"));
  }
}

TEST(GeoModeNameTest, RoundTripsThroughParse) {
  for (const GeoMode mode : {GeoMode::kNone, GeoMode::kBaseline,
                             GeoMode::kTerngrad, GeoMode::kGaia,
                             GeoMode::kWeightgrad}) {
    SCOPED_TRACE(std::string(GeoModeName(mode)));
    EXPECT_TRUE(IsKnownGeoMode(mode));
    EXPECT_EQ(*ParseGeoMode(GeoModeName(mode)), mode);
  }
  EXPECT_EQ(GeoModeNames(), "baseline, terngrad, gaia, weightgrad");
  EXPECT_FALSE(IsKnownGeoMode(static_cast<GeoMode>(17)));
  EXPECT_EQ(GeoModeName(static_cast<GeoMode>(17)), "");
}

TEST(UsesLpsTest, OnlyGaiaAndWeightgrad) {
  EXPECT_FALSE(UsesLps(GeoMode::kNone));
  EXPECT_FALSE(UsesLps(GeoMode::kBaseline));
  EXPECT_FALSE(UsesLps(GeoMode::kTerngrad));
  EXPECT_TRUE(UsesLps(GeoMode::kGaia));
  EXPECT_TRUE(UsesLps(GeoMode::kWeightgrad));
}

}  // namespace
}  // namespace tern

#include "core/push_refusal.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "core/admission.h"
#include "core/barrier.h"
#include "core/payload_validation.h"
#include "gtest/gtest.h"

namespace tern::core {
namespace {

const StepNames kShard{"step", "shard 0"};

TEST(PushRefusalTest, ReadsTheCoreRefusalsBack) {
  EXPECT_EQ(ClassifyPushRefusal(StaleError(kShard, 1, 3)), PushRefusal::kStale);
  EXPECT_EQ(ClassifyPushRefusal(FutureError(kShard, 5, 3)),
            PushRefusal::kFuture);
  EXPECT_EQ(ClassifyPushRefusal(InFlightError(kShard, 3, "push", "worker 2")),
            PushRefusal::kDuplicate);
  EXPECT_EQ(ClassifyPushRefusal(TooManyWaitsError("worker 2", "step 3")),
            PushRefusal::kDuplicate);
  EXPECT_EQ(ClassifyPushRefusal(CheckMagnitude(
                "value 3", std::numeric_limits<float>::quiet_NaN())),
            PushRefusal::kNan);
  EXPECT_EQ(ClassifyPushRefusal(CheckMagnitude(
                "scaler", std::numeric_limits<float>::infinity())),
            PushRefusal::kNan);
  EXPECT_EQ(ClassifyPushRefusal(CheckMagnitude("value 3", 1e31f)),
            PushRefusal::kInvalid);
}

TEST(PushRefusalTest, FallsBackOnTheCode) {
  EXPECT_EQ(ClassifyPushRefusal(absl::InvalidArgumentError("chunk 9?")),
            PushRefusal::kInvalid);
  EXPECT_EQ(ClassifyPushRefusal(absl::ResourceExhaustedError("too big")),
            PushRefusal::kInvalid);
  EXPECT_EQ(ClassifyPushRefusal(absl::PermissionDeniedError("not you")),
            PushRefusal::kUnauthorized);
  EXPECT_EQ(ClassifyPushRefusal(absl::UnauthenticatedError("who?")),
            PushRefusal::kUnauthorized);
  EXPECT_EQ(ClassifyPushRefusal(absl::DeadlineExceededError("late")),
            PushRefusal::kTimeout);
  EXPECT_EQ(ClassifyPushRefusal(absl::UnavailableError("shutting down")),
            PushRefusal::kUnavailable);
  EXPECT_EQ(ClassifyPushRefusal(absl::FailedPreconditionError("not joined")),
            PushRefusal::kOther);
  EXPECT_EQ(ClassifyPushRefusal(absl::InternalError("?")), PushRefusal::kOther);
}

TEST(PushRefusalTest, NamesAreDistinctLabelValues) {
  std::set<std::string> names;
  for (int r = 0; r <= static_cast<int>(PushRefusal::kOther); ++r) {
    const std::string name = PushRefusalName(static_cast<PushRefusal>(r));
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"),
              std::string::npos);
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 9u);
}

}  // namespace
}  // namespace tern::core

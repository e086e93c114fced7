#include "core/push_refusal.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace tern::core {
namespace {

// The words the core's refusals carry (admission.cc, barrier.cc,
// payload_validation.cc); push_refusal_test.cc holds them to it.
constexpr absl::string_view kStaleWords = " is stale: ";
constexpr absl::string_view kFutureWords = " is in the future: ";
constexpr absl::string_view kInFlightWords = "is still being added; retry";
constexpr absl::string_view kTooManyWaitsWords = " calls waiting for ";
constexpr absl::string_view kNonFiniteWords = "NaN/Inf";

PushRefusal ClassifyByCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
      return PushRefusal::kInvalid;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return PushRefusal::kUnauthorized;
    case absl::StatusCode::kDeadlineExceeded:
      return PushRefusal::kTimeout;
    case absl::StatusCode::kUnavailable:
      return PushRefusal::kUnavailable;
    default:
      return PushRefusal::kOther;
  }
}

}  // namespace

const char* PushRefusalName(PushRefusal refusal) {
  switch (refusal) {
    case PushRefusal::kStale:
      return "stale";
    case PushRefusal::kFuture:
      return "future";
    case PushRefusal::kInvalid:
      return "invalid";
    case PushRefusal::kNan:
      return "nan";
    case PushRefusal::kDuplicate:
      return "duplicate";
    case PushRefusal::kUnauthorized:
      return "unauthorized";
    case PushRefusal::kTimeout:
      return "timeout";
    case PushRefusal::kUnavailable:
      return "unavailable";
    case PushRefusal::kOther:
      return "other";
  }
  return "other";
}

PushRefusal ClassifyPushRefusal(const absl::Status& status) {
  const absl::string_view message = status.message();
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
      if (absl::StrContains(message, kStaleWords)) return PushRefusal::kStale;
      if (absl::StrContains(message, kFutureWords)) {
        return PushRefusal::kFuture;
      }
      break;
    case absl::StatusCode::kInvalidArgument:
      if (absl::StrContains(message, kNonFiniteWords)) return PushRefusal::kNan;
      break;
    case absl::StatusCode::kUnavailable:
      if (absl::StrContains(message, kInFlightWords)) {
        return PushRefusal::kDuplicate;
      }
      break;
    case absl::StatusCode::kResourceExhausted:
      if (absl::StrContains(message, kTooManyWaitsWords)) {
        return PushRefusal::kDuplicate;
      }
      break;
    default:
      break;
  }
  return ClassifyByCode(status.code());
}

}  // namespace tern::core

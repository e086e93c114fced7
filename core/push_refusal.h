// Why a server refused a push, as one of a few names: the `reason` label
// of tern_ps_pushes_rejected_total (server/shard_metrics.h). The names are
// read back from the statuses the server core makes (admission.h,
// barrier.h, payload_validation.h), so they stay bounded whatever a peer
// sends; push_refusal_test.cc builds each refusal with the function that
// makes it, so a reworded message fails there rather than in a dashboard.
#ifndef TERN_CORE_PUSH_REFUSAL_H_
#define TERN_CORE_PUSH_REFUSAL_H_

#include "absl/status/status.h"

namespace tern::core {

enum class PushRefusal {
  kStale,         // StaleError: a step before the open one, not cached
  kFuture,        // FutureError: a step after the open one
  kInvalid,       // INVALID_ARGUMENT (or a size RESOURCE_EXHAUSTED): a
                  // payload or request that does not fit the run
  kNan,           // a NaN or Inf value or scaler (CheckMagnitude)
  kDuplicate,     // InFlightError, TooManyWaitsError: another copy of the
                  // same push is being added or waits already
  kUnauthorized,  // PERMISSION_DENIED, UNAUTHENTICATED: not that worker
  kTimeout,       // DEADLINE_EXCEEDED: the barrier's timeout
  kUnavailable,   // UNAVAILABLE: shutting down
  kOther,         // anything else (not joined, a failed run)
};

// "stale", "future", "invalid", "nan", "duplicate", "unauthorized",
// "timeout", "unavailable", "other".
const char* PushRefusalName(PushRefusal refusal);

// Which refusal a non-OK `status` is; kOther for what is not listed above.
PushRefusal ClassifyPushRefusal(const absl::Status& status);

}  // namespace tern::core

#endif  // TERN_CORE_PUSH_REFUSAL_H_

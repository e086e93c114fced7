#include "common/process/exit_codes.h"

namespace tern::process {

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kResourceExhausted:
      return kExitTransient;
    default:
      return kExitPermanent;
  }
}

}  // namespace tern::process

#include "core/admission.h"

#include "absl/strings/str_cat.h"

namespace tern::core {

absl::Status StaleError(const StepNames& names, uint64_t step, uint64_t open) {
  return absl::FailedPreconditionError(
      absl::StrCat(names.step, " ", step, " is stale: ", names.server,
                   " is at ", names.step, " ", open));
}

absl::Status FutureError(const StepNames& names, uint64_t step,
                         uint64_t open) {
  return absl::FailedPreconditionError(
      absl::StrCat(names.step, " ", step, " is in the future: ", names.server,
                   " is at ", names.step, " ", open));
}

absl::Status InFlightError(const StepNames& names, uint64_t step,
                           absl::string_view what, absl::string_view member) {
  return absl::UnavailableError(
      absl::StrCat(names.step, " ", step, ": an earlier ", what, " of ",
                   member, " is still being added; retry"));
}

absl::Status CheckOpenStep(const StepNames& names, uint64_t step,
                           uint64_t open) {
  if (step > open) return FutureError(names, step, open);
  if (step < open) return StaleError(names, step, open);
  return absl::OkStatus();
}

}  // namespace tern::core

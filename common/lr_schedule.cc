#include "common/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tern {

absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "poly") return LrScheduleKind::kPoly;
  if (name == "step") return LrScheduleKind::kStep;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown lr_schedule '", name, "' (expected constant, poly or step)"));
}

absl::StatusOr<LrSchedule> LrSchedule::Create(LrScheduleKind kind, double lr,
                                              uint64_t total_steps,
                                              uint64_t step_every,
                                              double gamma) {
  if (!std::isfinite(lr) || lr < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lr must be a finite number >= 0, got ", lr));
  }
  if (kind == LrScheduleKind::kPoly && total_steps == 0) {
    return absl::InvalidArgumentError("the poly lr_schedule needs steps >= 1");
  }
  if (kind == LrScheduleKind::kStep) {
    if (step_every == 0) {
      return absl::InvalidArgumentError(
          "the step lr_schedule needs lr_step_every >= 1");
    }
    if (!std::isfinite(gamma) || gamma < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("lr_gamma must be a finite number >= 0, got ", gamma));
    }
  }
  return LrSchedule(kind, lr, total_steps, step_every, gamma);
}

double LrSchedule::Rate(uint64_t step) const {
  switch (kind_) {
    case LrScheduleKind::kConstant:
      return lr_;
    case LrScheduleKind::kPoly: {
      if (step >= total_steps_) return 0.0;
      const double remaining =
          1.0 - static_cast<double>(step) / static_cast<double>(total_steps_);
      return lr_ * std::sqrt(remaining);
    }
    case LrScheduleKind::kStep:
      return lr_ * std::pow(gamma_, static_cast<double>(step / step_every_));
  }
  return lr_;
}

}  // namespace tern

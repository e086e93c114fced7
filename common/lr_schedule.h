// Learning-rate schedules (--lr_schedule of `tern worker`, and of `tern ps`
// in WeightGrad mode). Every process computes the same rate from the same
// step, so replicas stay bit-identical (DESIGN section 3, step 6).
//
// Thread safety: an LrSchedule is immutable; Rate() may be called from any
// thread.
#ifndef TERN_COMMON_LR_SCHEDULE_H_
#define TERN_COMMON_LR_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tern {

enum class LrScheduleKind {
  // lr_t = lr.
  kConstant,
  // lr_t = lr * (1 - t / steps)^0.5: the polynomial decay with power 0.5 that
  // the TernGrad experiments use (Wen et al. 2017, section 5).
  kPoly,
  // lr_t = lr * gamma^floor(t / step_every).
  kStep,
};

// "constant", "poly" or "step"; INVALID_ARGUMENT otherwise.
absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(absl::string_view name);

class LrSchedule {
 public:
  // INVALID_ARGUMENT when lr is negative or not finite, when a poly schedule
  // has total_steps == 0, or when a step schedule has step_every == 0 or a
  // gamma that is negative or not finite.
  static absl::StatusOr<LrSchedule> Create(LrScheduleKind kind, double lr,
                                           uint64_t total_steps,
                                           uint64_t step_every, double gamma);

  // The rate of step t (numbered from 0). A poly schedule reaches 0 at
  // t = total_steps and stays there.
  double Rate(uint64_t step) const;

  LrScheduleKind kind() const { return kind_; }

 private:
  LrSchedule(LrScheduleKind kind, double lr, uint64_t total_steps,
             uint64_t step_every, double gamma)
      : kind_(kind),
        lr_(lr),
        total_steps_(total_steps),
        step_every_(step_every),
        gamma_(gamma) {}

  LrScheduleKind kind_;
  double lr_;
  uint64_t total_steps_;
  uint64_t step_every_;
  double gamma_;
};

}  // namespace tern

#endif  // TERN_COMMON_LR_SCHEDULE_H_

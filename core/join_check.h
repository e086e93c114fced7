// Join-config comparison: a later joiner's settings against the first
// joiner's, field by field, keeping the first difference in one sentence:
//   FAILED_PRECONDITION
//   "<what> <theirs> of <them> differs from <ours> of <first>: <why>"
// e.g. "seed 99 of worker 2 differs from 3 of worker 0: every worker must
// run with the same flags". Later fields are not compared once one
// differs. Not thread-safe (one comparison per join, under the server's
// lock).
#ifndef TERN_CORE_JOIN_CHECK_H_
#define TERN_CORE_JOIN_CHECK_H_

#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tern::core {

// The reason given for flags that must match ("every worker must run with
// the same flags").
inline constexpr absl::string_view kSameFlags =
    "every worker must run with the same flags";

class JoinComparison {
 public:
  // `them` and `first` as messages name them: "worker 2", "data center 1".
  JoinComparison(std::string them, std::string first)
      : them_(std::move(them)), first_(std::move(first)) {}

  // Compares two values of a plain type: numbers printed by StrCat, bools
  // as true/false, strings as they are. `!(a == b)`: a NaN never matches.
  template <typename T>
  JoinComparison& Field(absl::string_view what, const T& theirs,
                        const T& ours, absl::string_view why = kSameFlags) {
    if (status_.ok() && !(theirs == ours)) {
      Differs(what, Text(theirs), Text(ours), why);
    }
    return *this;
  }

  // For values compared one way and printed another: records a difference
  // when `same` is false, with the texts given.
  JoinComparison& Texts(bool same, absl::string_view what,
                        absl::string_view theirs, absl::string_view ours,
                        absl::string_view why = kSameFlags) {
    if (status_.ok() && !same) Differs(what, theirs, ours, why);
    return *this;
  }

  // OK, or the first difference.
  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

 private:
  void Differs(absl::string_view what, absl::string_view theirs,
               absl::string_view ours, absl::string_view why) {
    status_ = absl::FailedPreconditionError(
        absl::StrCat(what, " ", theirs, " of ", them_, " differs from ", ours,
                     " of ", first_, ": ", why));
  }

  static std::string Text(bool value) { return value ? "true" : "false"; }
  static std::string Text(const std::string& value) { return value; }
  template <typename T,
            typename = std::enable_if_t<std::is_arithmetic_v<T> &&
                                        !std::is_same_v<T, bool>>>
  static std::string Text(T value) {
    return absl::StrCat(value);
  }

  std::string them_;
  std::string first_;
  absl::Status status_;
};

}  // namespace tern::core

#endif  // TERN_CORE_JOIN_CHECK_H_

// Early-return helpers for absl::Status and absl::StatusOr<T>, so that
// functions that can fail read as straight-line code.
#ifndef TERN_COMMON_STATUS_MACROS_H_
#define TERN_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the status of `expr` from the enclosing function if it is not OK.
#define TERN_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::absl::Status tern_status_ = (expr);           \
    if (!tern_status_.ok()) return tern_status_;    \
  } while (false)

#define TERN_STATUS_CONCAT_INNER_(a, b) a##b
#define TERN_STATUS_CONCAT_(a, b) TERN_STATUS_CONCAT_INNER_(a, b)

// `TERN_ASSIGN_OR_RETURN(auto x, F());` declares x from an OK StatusOr, or
// returns its status from the enclosing function.
#define TERN_ASSIGN_OR_RETURN(lhs, expr)                                    \
  TERN_ASSIGN_OR_RETURN_IMPL_(TERN_STATUS_CONCAT_(tern_statusor_, __LINE__), \
                              lhs, expr)

#define TERN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

#endif  // TERN_COMMON_STATUS_MACROS_H_

// Status propagation helpers: errors cross every library boundary as absl::Status.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CROSSREG_CONCAT_INNER(a, b) a##b
#define CROSSREG_CONCAT(a, b) CROSSREG_CONCAT_INNER(a, b)

// Returns from the calling function if `expr` yields a non-OK status.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status crossreg_status_ = (expr);          \
    if (!crossreg_status_.ok()) return crossreg_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(CROSSREG_CONCAT(crossreg_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

// Why a request was cancelled, carried as data on its CANCELLED status (an
// absl::Status payload), so that whoever reports the request's end (the metrics'
// reason label, the HTTP status) reads the cause instead of matching message text.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace crossreg {

enum class CancelCause {
  kClient,        // the client went away or cancelled its call
  kOwnerAbort,    // the request's owner called Abort
  kShutdown,      // the server drained and its timeout passed
};

// CANCELLED with `message`, marked with `cause`.
absl::Status CancelledBecause(CancelCause cause, std::string_view message);

// The cause a CANCELLED status carries; nullopt for other statuses and for
// cancellations made without one.
std::optional<CancelCause> CancelCauseOf(const absl::Status& status);

}  // namespace crossreg

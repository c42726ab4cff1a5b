#include "server/server_metrics.h"

namespace crossreg::server {

const char* RequestEndReasonName(RequestEndReason reason) {
  switch (reason) {
    case RequestEndReason::kStop:
      return "stop";
    case RequestEndReason::kLength:
      return "length";
    case RequestEndReason::kContext:
      return "context";
    case RequestEndReason::kCancelled:
      return "cancelled";
    case RequestEndReason::kDeadline:
      return "deadline";
    case RequestEndReason::kAborted:
      return "aborted";
    case RequestEndReason::kDisconnected:
      return "disconnected";
    case RequestEndReason::kShutdown:
      return "shutdown";
    case RequestEndReason::kError:
      return "error";
  }
  return "error";
}

}  // namespace crossreg::server

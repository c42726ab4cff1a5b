// A submitted request's end, recorded once by whichever front door served it (gRPC's
// GenerateReactor, the HTTP front door): counted in crossreg_requests_ended_total
// and logged as one `request_end` event with the same fields in both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "engine/decoding/sequence_decoder.h"
#include "scheduler/scheduler.h"
#include "server/server_metrics.h"

namespace crossreg::server {

struct RequestEnd {
  std::string api;  // "grpc", "http"
  std::string request_id;
  std::string client;  // the principal
  DecodingMode mode = DecodingMode::kAutoregressive;
  RequestEndReason reason = RequestEndReason::kError;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // of prompt_tokens, reused from the prefix cache
  std::string finish;                      // the API's finish reason, when it finished
  std::optional<double> tokens_per_forward;
  std::optional<RequestTimings> timings;   // the scheduler's, when it finished
  double total_seconds = 0;                // otherwise, measured by the front door
  absl::Status error;                      // why it did not finish
};

// Counts (when `metrics` is not null) and logs one end.
void RecordRequestEnd(ServerMetrics* metrics, const RequestEnd& end);

// The reason for a scheduler error event, from its status (and the CancelCause a
// CANCELLED status carries).
RequestEndReason EndReasonOfError(const absl::Status& error);
// The reason for a finished request.
RequestEndReason EndReasonOfFinish(FinishReason reason);

}  // namespace crossreg::server

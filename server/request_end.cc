#include "server/request_end.h"

#include "scheduler/cancel_cause.h"
#include "server/log_format.h"

namespace crossreg::server {

void RecordRequestEnd(ServerMetrics* metrics, const RequestEnd& end) {
  if (metrics != nullptr) metrics->OnRequestEnded(end.mode, end.reason);
  nlohmann::ordered_json fields;
  fields["request_id"] = end.request_id;
  fields["api"] = end.api;
  fields["client"] = end.client;
  fields["mode"] = DecodingModeName(end.mode);
  fields["reason"] = RequestEndReasonName(end.reason);
  fields["prompt_tokens"] = end.prompt_tokens;
  fields["completion_tokens"] = end.completion_tokens;
  if (end.cached_prompt_tokens > 0) fields["cached_prompt_tokens"] = end.cached_prompt_tokens;
  if (!end.finish.empty()) fields["finish"] = end.finish;
  if (end.tokens_per_forward.has_value()) fields["tpf"] = *end.tokens_per_forward;
  if (end.timings.has_value()) {
    fields["queue_s"] = end.timings->queue_seconds;
    fields["ttft_s"] = end.timings->time_to_first_token;
    fields["total_s"] = end.timings->total_seconds;
  } else {
    fields["total_s"] = end.total_seconds;
  }
  if (!end.error.ok()) fields["status"] = end.error.ToString();
  LogEvent(spdlog::level::info, "request_end", "request ended", fields);
}

RequestEndReason EndReasonOfError(const absl::Status& error) {
  switch (error.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return RequestEndReason::kDeadline;
    case absl::StatusCode::kCancelled:
      switch (CancelCauseOf(error).value_or(CancelCause::kClient)) {
        case CancelCause::kOwnerAbort:
          return RequestEndReason::kAborted;
        case CancelCause::kShutdown:
          return RequestEndReason::kShutdown;
        case CancelCause::kClient:
          break;
      }
      return RequestEndReason::kCancelled;
    default:
      return RequestEndReason::kError;
  }
}

RequestEndReason EndReasonOfFinish(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return RequestEndReason::kLength;
    case FinishReason::kContext:
      return RequestEndReason::kContext;
    case FinishReason::kStop:
    case FinishReason::kNone:
      break;
  }
  return RequestEndReason::kStop;
}

}  // namespace crossreg::server

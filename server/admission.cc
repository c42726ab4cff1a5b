#include "server/admission.h"

#include <utility>

#include "server/security/request_id.h"

namespace crossreg::server {

absl::StatusOr<Admitted> Admit(const AdmissionContext& context, const std::string& principal,
                               std::optional<std::chrono::steady_clock::time_point> deadline,
                               const std::function<absl::StatusOr<v1::GenerateRequest>()>& make_request) {
  Admitted admitted;
  auto slot = context.stream_limiter->Acquire(principal);
  if (!slot.ok()) return slot.status();
  admitted.stream_slot = std::move(*slot);
  absl::StatusOr<v1::GenerateRequest> proto = make_request();
  if (!proto.ok()) return proto.status();
  auto validated = RequestFromProto(*proto, *context.env, *context.defaults);
  if (!validated.ok()) return validated.status();
  admitted.request = std::move(validated->request);
  if (admitted.request.request_id.empty()) admitted.request.request_id = RandomRequestId();
  admitted.request.owner = principal;
  admitted.request.deadline = deadline;
  return admitted;
}

absl::Status SubmitAdmitted(const AdmissionContext& context, GenerationRequest request,
                            EventHandler on_event) {
  absl::Status submitted = context.scheduler->Submit(std::move(request), std::move(on_event));
  if (submitted.code() == absl::StatusCode::kFailedPrecondition && context.draining->load()) {
    return absl::UnavailableError("server is shutting down; retry on another replica");
  }
  return submitted;
}

}  // namespace crossreg::server

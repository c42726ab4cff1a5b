// Admission, shared by both front doors (gRPC's GenerateReactor, HTTP's front door) so
// that a request is admitted in one order and refused by the same rules with the same
// field whichever door it came through. After the door's own checks (credentials, its
// protocol's parsing), in this order:
//   1. the caller's stream slot (ClientStreamLimiter): nothing is rendered, tokenized
//      or compiled for a caller over its limit;
//   2. the request as a crossreg.v1.GenerateRequest, which the door makes now (HTTP
//      renders a chat template here);
//   3. its rules, tokens and grammar (RequestFromProto, over the field table);
//   4. the scheduler (Scheduler::Submit), whose refusal after shutdown reads as
//      UNAVAILABLE, "go elsewhere".
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "crossreg/v1/generation.pb.h"
#include "scheduler/scheduler.h"
#include "server/request_from_proto.h"
#include "server/security/client_stream_limiter.h"

namespace crossreg::server {

struct AdmissionContext {
  Scheduler* scheduler = nullptr;
  const DecodingEnvironment* env = nullptr;
  const RequestDefaults* defaults = nullptr;
  ClientStreamLimiter* stream_limiter = nullptr;
  const std::atomic<bool>* draining = nullptr;
};

// A request that passed steps 1-3: what the door submits.
struct Admitted {
  GenerationRequest request;  // request_id drawn when the client gave none; owner and deadline set
  std::unique_ptr<ClientStreamLimiter::Lease> stream_slot;
};

// Steps 1-3 for `principal`'s request, which `make_request` builds once the slot is held.
absl::StatusOr<Admitted> Admit(const AdmissionContext& context, const std::string& principal,
                               std::optional<std::chrono::steady_clock::time_point> deadline,
                               const std::function<absl::StatusOr<v1::GenerateRequest>()>& make_request);

// Step 4.
absl::Status SubmitAdmitted(const AdmissionContext& context, GenerationRequest request,
                            EventHandler on_event);

}  // namespace crossreg::server

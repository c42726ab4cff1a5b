// The request fields `crossreg` and `crossreg-loadgen` share, as flags: sampling
// (--temperature --top_k --top_p --seed --max_tokens --stop --ignore_eos), Cross-
// Regression knobs (--beta --tau --gamma) and the per-call deadline (--timeout_s).
// The prompt and the decoding mode are each program's own.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/client_context.h>

#include "crossreg/v1/generation.pb.h"

namespace crossreg::clients {

// Values of --stop taken out of argv before parsing (see repeated_flag.h).
void SetRepeatedStopValues(std::vector<std::string> values);

// The stop sequences of every --stop, comma lists split and escapes resolved.
std::vector<std::string> StopSequencesFromFlags();

// A request with sampling and decoding (beta, tau, gamma) set from the flags.
// Values are sent as given: the server validates them and answers INVALID_ARGUMENT,
// so the rules live in one place.
crossreg::v1::GenerateRequest RequestTemplateFromFlags();

// Sets the call's deadline to now + --timeout_s (no deadline when it is 0).
void ApplyDeadlineFromFlags(grpc::ClientContext& context);

}  // namespace crossreg::clients

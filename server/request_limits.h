// The limits a request meets at either front door, in one place: the gRPC service and
// the OpenAI HTTP API read them from here, and docs/security.md lists them with where
// each is enforced. A request over any of them is refused with the field named; none
// can be raised by a request. Limits the engine owns (logit_bias entries, top
// log-probabilities, grammar sizes and work budgets) are declared beside the code that
// enforces them and named here so that the list is whole.
#pragma once

#include <cstddef>

#include "engine/io/bounded_json.h"

namespace crossreg::server {

// A JSON body (HTTP) and every JSON document inside a request (a schema, a tool's
// parameters) is parsed under these, while it is parsed: nesting, members of an
// object, elements of an array and values in all. The body's size is the server's
// --max_message_bytes (gRPC's receive limit too).
inline constexpr JsonLimits kRequestJsonLimits{
    .max_depth = 64, .max_object_members = 4096, .max_array_elements = size_t{1} << 20, .max_values = size_t{1} << 21};

// A structured-output source (JSON schema, GBNF grammar, regular expression), on its
// raw bytes before anything reads it: compiling is the request's cost.
inline constexpr size_t kMaxConstraintBytes = 64 * 1024;

inline constexpr size_t kMaxRequestIdBytes = 256;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;

// Engine-owned, for the list: kMaxLogitBiasEntries (engine/decoding/logit_adjustments.h),
// kMaxTopLogprobs (engine/decoding/token_logprobs.h), GrammarBudget
// (engine/grammar/grammar_budget.h).

}  // namespace crossreg::server

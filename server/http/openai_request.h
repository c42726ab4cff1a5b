// An OpenAI-style JSON request (POST /v1/completions, /v1/chat/completions) read
// into the same crossreg.v1.GenerateRequest the gRPC API takes, so one set of rules
// validates both (server/request_from_proto.h): the decoding controls are accepted
// as extra top-level fields (mode, beta, tau, gamma, fork_outcomes, fork_depth, draft_layout,
// ngram_assist, adaptive_gamma). Errors name the field as the JSON body spells it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "crossreg/v1/generation.pb.h"
#include "server/http/openai_chat_request.h"

namespace crossreg::server {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string model;                  // may be empty: the served model
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool return_token_ids = false;      // crossreg extension: prompt and completion token ids in the reply
  ChatRequest chat;                   // chat: the conversation and its tools
  // The request without its prompt for chat (the template makes it); for completions
  // with `prompt` as text or token ids.
  v1::GenerateRequest proto;
};

struct OpenAiParseOptions {
  // Accept and drop fields the parser does not know, at the top level and inside
  // stream_options, messages and content parts, for clients that send extras of their
  // own (the server's --http_ignore_unknown_fields). Off: they are refused by name, as
  // OpenAI does, so that a misspelt option is not silently left at its default.
  bool ignore_unknown_fields = false;
};

// INVALID_ARGUMENT "field: what is wrong" for malformed JSON (naming the field whose
// value broke it, e.g. "temperature: number out of range (1e400)", else "body"),
// unknown fields ("messages[0].contnt: unknown field (did you mean \"content\"?)"),
// wrong types, numbers out of range (every numeric field, by the engine's rules where
// the request alone can tell), unsupported options (n != 1), and stream_options
// without "stream": true.
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(const std::string& body, OpenAiEndpoint endpoint,
                                                 const OpenAiParseOptions& options = {});

// A RequestFromProto / scheduler error that names a proto field (decoding.beta) with the
// JSON body's name for it (beta), renamed as data (engine/field_violation.h); others
// unchanged.
absl::Status InJsonTerms(const absl::Status& status, OpenAiEndpoint endpoint);

}  // namespace crossreg::server

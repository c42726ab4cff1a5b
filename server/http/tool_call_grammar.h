// The grammar a forced tool call is generated under (tool_choice "required", or a named
// function): the model's call format around a JSON object whose "name" is one of the
// allowed functions and whose arguments follow that function's `parameters` schema, so
// the call always parses and validates. Hermes (<tool_call> blocks, one or several when
// parallel calls are allowed) or Llama 3.1 JSON ({"name", "parameters"}, several joined
// by "; "). Objects in the arguments are closed to their listed properties unless the
// schema says otherwise (additionalProperties), as OpenAI's strict mode reads them. The
// JSON is compact (engine/grammar/json_schema_grammar.h): the keys, quotes
// and braces are forced text, which every mode drafts, so speculation stays exact and cheap.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/chat/tool_call_format.h"
#include "server/http/openai_chat_request.h"

namespace crossreg::server {

// GBNF text for `request`'s forced calls (calls_tools() with kRequired or kFunction).
// INVALID_ARGUMENT naming the field ("tools[1].function.parameters.properties.x: ...")
// for a parameters schema the grammar compiler does not support.
absl::StatusOr<std::string> ToolCallGrammar(const ChatRequest& request, chat::ToolCallFormat format);

}  // namespace crossreg::server

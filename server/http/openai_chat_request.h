// The conversation of a /v1/chat/completions body: messages (system or developer,
// user, assistant with its tool calls, tool results), tools, tool_choice and
// parallel_tool_calls, checked field by field and kept in OpenAI's JSON form, which is
// what a chat template renders (server/chat/chat_formatter.h). Errors name the field as
// the body spells it ("messages[2].tool_calls[0].function.arguments: ...").
#pragma once

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace crossreg::server {

struct ToolChoice {
  enum class Kind { kNone, kAuto, kRequired, kFunction };
  Kind kind = Kind::kNone;  // OpenAI's default: auto with tools, none without
  std::string function;     // kFunction: the tool it must call
};

struct ChatRequest {
  // Each {role, content (text, or null for an assistant's tool calls)[, name][, tool_calls]
  // [, tool_call_id][, reasoning_content]}; "developer" is read as "system".
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null, or the tool definitions as sent
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  bool calls_tools() const { return tool_choice.kind != ToolChoice::Kind::kNone; }
};

// Reads messages, tools, tool_choice and parallel_tool_calls of `body`; `strict`
// refuses unknown fields inside messages and tools (--http_ignore_unknown_fields off).
absl::Status ReadChatRequest(const nlohmann::ordered_json& body, bool strict, ChatRequest& out);

}  // namespace crossreg::server

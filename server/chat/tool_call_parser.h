// A finished assistant message's text into its content and OpenAI-shaped tool calls.
// Text that does not make a well-formed call stays content: no output is ever dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/chat/tool_call_format.h"
#include "server/chat/tool_call_object_reader.h"

namespace crossreg::chat {

struct ParsedToolCall {
  std::string name;
  // A JSON object's text: the bytes the model wrote for an object, or the content of a
  // string it wrote instead ("{}" when it gave no arguments).
  std::string arguments;

  friend bool operator==(const ParsedToolCall&, const ParsedToolCall&) = default;
};

struct ParsedMessage {
  // The text outside the calls. A run of calls (whitespace between them) goes with the
  // whitespace around it, except that the whitespace before the run stays where text comes
  // both before and after it ("A\n<call>\nB" -> "A\nB"). The text as it is when there are no
  // calls. May be empty.
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
};

// Hermes: each <tool_call> block runs to the first </tool_call> after it (or to the end of
// the text, less a start of the close tag there) and is a call when all it holds is one
// object that ToolCallObjectReader accepts under HermesCallRules(); a block that is not
// stays in the content, tags and all.
// Llama 3.1: the text (after whitespace and an optional <|python_tag|>) is objects under
// Llama3CallRules() joined by ';' (one may end it), or it is all content.
ParsedMessage ParseToolCalls(std::string_view text, ToolCallFormat format);

ToolCallObjectRules HermesCallRules();
ToolCallObjectRules Llama3CallRules();

}  // namespace crossreg::chat

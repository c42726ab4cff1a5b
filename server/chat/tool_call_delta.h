// What a streamed response sends for one piece of generated text, in the shape of
// OpenAI's chat.completion.chunk delta (content and tool_calls).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace crossreg::chat {

struct ToolCallDelta {
  int index = 0;          // which call of the message, from 0
  std::string id;         // on the call's first delta only
  std::string name;       // on the call's first delta only
  std::string arguments;  // the next piece of the arguments text (may be empty)
};

// Content and call pieces are each in the order generated; the order between the two
// within one StreamDelta carries no meaning.
struct StreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return content.empty() && tool_calls.empty(); }
  // Adds a piece of call `index`'s arguments, joining it to that call's last delta when it
  // is the last one here, so that one piece of text gives one delta per call.
  void AppendArguments(int index, std::string_view piece);
};

}  // namespace crossreg::chat

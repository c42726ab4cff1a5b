// A tool-calling model's text, fed as it is generated, into OpenAI's streamed deltas:
// content as soon as it cannot be part of a call, a call's first delta (index, id, name)
// once its name is read, then its arguments' text piece by piece. Joined up, the deltas
// equal ParseToolCalls on the whole text, but for a Hermes block that proves malformed
// after its name went out (see tool_call_hermes_stream.h).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <variant>

#include "server/chat/tool_call_delta.h"
#include "server/chat/tool_call_format.h"
#include "server/chat/tool_call_hermes_stream.h"
#include "server/chat/tool_call_id.h"
#include "server/chat/tool_call_llama3_stream.h"

namespace crossreg::chat {

class ToolCallStream {
 public:
  // `new_id` names each call (tests pass a fixed sequence).
  explicit ToolCallStream(ToolCallFormat format, std::function<std::string()> new_id = RandomToolCallId);

  // What can be sent now that `text` has been generated (pieces may split characters, tags
  // and escapes anywhere).
  StreamDelta Push(std::string_view text);
  // End of generation, called once, last: everything held back. A Hermes block left open
  // is a call if its object was complete, else content; Llama 3.1 calls are all sent here.
  StreamDelta Finish();
  // Whether any call's first delta has been sent (for finish_reason "tool_calls"); for
  // Llama 3.1, only after Finish.
  bool saw_tool_calls() const;

 private:
  std::variant<HermesToolCallStream, Llama3JsonToolCallStream> parser_;
};

}  // namespace crossreg::chat

// The streaming side of the Llama 3.1 JSON format. There the whole message is the call, so
// nothing tells a call from a JSON answer until the text ends: a message whose first
// character (after whitespace and an optional <|python_tag|>) is '{' is held back and
// parsed by ParseToolCalls at Finish; any other message streams as content at once.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "server/chat/tool_call_delta.h"

namespace crossreg::chat {

class Llama3JsonToolCallStream {
 public:
  explicit Llama3JsonToolCallStream(std::function<std::string()> new_id) : new_id_(std::move(new_id)) {}

  void Push(std::string_view text, StreamDelta& out);
  void Finish(StreamDelta& out);
  // Calls go out at Finish, so this is false until then.
  bool saw_tool_calls() const { return calls_sent_ > 0; }

 private:
  enum class Mode {
    kUndecided,  // only whitespace and (a prefix of) the python tag so far
    kContent,    // not a call: everything is content
    kMaybeCalls  // starts with '{': held to the end
  };

  void Decide();

  std::function<std::string()> new_id_;
  Mode mode_ = Mode::kUndecided;
  std::string held_;
  // While undecided: how far held_ has been read (whitespace and the python tag).
  size_t decided_up_to_ = 0;
  bool saw_python_tag_ = false;
  int calls_sent_ = 0;
};

}  // namespace crossreg::chat

#include "server/chat/tool_call_llama3_stream.h"

#include "server/chat/tool_call_parser.h"
#include "server/chat/tool_call_text.h"

namespace crossreg::chat {

void Llama3JsonToolCallStream::Push(std::string_view text, StreamDelta& out) {
  held_.append(text);
  if (mode_ == Mode::kUndecided) Decide();
  if (mode_ != Mode::kContent) return;
  const size_t sendable = CompleteUtf8PrefixLength(held_);
  out.content.append(held_, 0, sendable);
  held_.erase(0, sendable);
}

void Llama3JsonToolCallStream::Decide() {
  // Resumes at decided_up_to_, so that a message of only whitespace costs linear time.
  while (true) {
    while (decided_up_to_ < held_.size() && IsJsonSpace(held_[decided_up_to_])) ++decided_up_to_;
    const std::string_view rest = std::string_view(held_).substr(decided_up_to_);
    if (rest.empty()) return;
    if (!saw_python_tag_ && rest.front() == '<') {
      if (rest.size() < kPythonTag.size() && kPythonTag.substr(0, rest.size()) == rest) return;
      if (rest.substr(0, kPythonTag.size()) == kPythonTag) {
        saw_python_tag_ = true;
        decided_up_to_ += kPythonTag.size();
        continue;
      }
    }
    mode_ = rest.front() == '{' ? Mode::kMaybeCalls : Mode::kContent;
    return;
  }
}

void Llama3JsonToolCallStream::Finish(StreamDelta& out) {
  if (mode_ == Mode::kMaybeCalls) {
    ParsedMessage message = ParseToolCalls(held_, ToolCallFormat::kLlama3Json);
    out.content += message.content;
    for (ParsedToolCall& call : message.tool_calls) {
      out.tool_calls.push_back({.index = calls_sent_++,
                                .id = new_id_(),
                                .name = std::move(call.name),
                                .arguments = std::move(call.arguments)});
    }
  } else {
    out.content += held_;
  }
  held_.clear();
  mode_ = Mode::kUndecided;
  decided_up_to_ = 0;
  saw_python_tag_ = false;
}

}  // namespace crossreg::chat

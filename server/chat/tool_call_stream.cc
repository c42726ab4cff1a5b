#include "server/chat/tool_call_stream.h"

#include <utility>

namespace crossreg::chat {
namespace {

std::variant<HermesToolCallStream, Llama3JsonToolCallStream> ParserFor(ToolCallFormat format,
                                                                       std::function<std::string()> new_id) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return HermesToolCallStream(std::move(new_id));
    case ToolCallFormat::kLlama3Json:
      return Llama3JsonToolCallStream(std::move(new_id));
  }
  return HermesToolCallStream(std::move(new_id));
}

}  // namespace

ToolCallStream::ToolCallStream(ToolCallFormat format, std::function<std::string()> new_id)
    : parser_(ParserFor(format, std::move(new_id))) {}

StreamDelta ToolCallStream::Push(std::string_view text) {
  StreamDelta delta;
  std::visit([&](auto& parser) { parser.Push(text, delta); }, parser_);
  return delta;
}

StreamDelta ToolCallStream::Finish() {
  StreamDelta delta;
  std::visit([&](auto& parser) { parser.Finish(delta); }, parser_);
  return delta;
}

bool ToolCallStream::saw_tool_calls() const {
  return std::visit([](const auto& parser) { return parser.saw_tool_calls(); }, parser_);
}

}  // namespace crossreg::chat

#include "server/chat/tool_call_format.h"

namespace crossreg::chat {

ToolCallFormat ToolCallFormatFor(std::string_view chat_template) {
  const auto contains = [chat_template](std::string_view needle) {
    return chat_template.find(needle) != std::string_view::npos;
  };
  if (contains("<tool_call>")) return ToolCallFormat::kHermes;
  if (contains("<|python_tag|>") || (contains("parameters") && contains("ipython"))) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kHermes;
}

}  // namespace crossreg::chat

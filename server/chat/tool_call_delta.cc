#include "server/chat/tool_call_delta.h"

namespace crossreg::chat {

void StreamDelta::AppendArguments(int index, std::string_view piece) {
  if (piece.empty()) return;
  if (tool_calls.empty() || tool_calls.back().index != index) {
    tool_calls.push_back({.index = index, .id = {}, .name = {}, .arguments = {}});
  }
  tool_calls.back().arguments.append(piece);
}

}  // namespace crossreg::chat

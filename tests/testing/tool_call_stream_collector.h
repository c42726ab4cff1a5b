// Joins up a ToolCallStream's deltas for the tool-call tests, checking their OpenAI shape
// on the way (a call's first delta carries its next index, id and name; later ones neither).
#pragma once

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/chat/tool_call_delta.h"
#include "server/chat/tool_call_parser.h"
#include "server/chat/tool_call_stream.h"

namespace crossreg::chat {

// For GoogleTest's messages.
inline void PrintTo(const ParsedToolCall& call, std::ostream* out) {
  *out << "{name: \"" << call.name << "\", arguments: \"" << call.arguments << "\"}";
}

}  // namespace crossreg::chat

namespace crossreg::testing {

struct CollectedStream {
  std::string content;
  std::vector<chat::ParsedToolCall> calls;
  std::vector<std::string> ids;
  std::vector<std::string> pieces;  // every content and arguments piece, as sent
  bool saw_tool_calls = false;
};

inline void CollectDelta(const chat::StreamDelta& delta, CollectedStream& collected) {
  collected.content += delta.content;
  if (!delta.content.empty()) collected.pieces.push_back(delta.content);
  for (const chat::ToolCallDelta& call : delta.tool_calls) {
    const int calls = static_cast<int>(collected.calls.size());
    if (!call.id.empty()) {
      EXPECT_EQ(call.index, calls) << "a new call must take the next index";
      EXPECT_FALSE(call.name.empty()) << "a call's first delta names it";
      collected.calls.push_back({call.name, ""});
      collected.ids.push_back(call.id);
    } else {
      EXPECT_TRUE(call.name.empty()) << "only a call's first delta names it";
      EXPECT_EQ(call.index, calls - 1) << "arguments go to the call being read";
      if (call.index != calls - 1) continue;
    }
    collected.calls.back().arguments += call.arguments;
    if (!call.arguments.empty()) collected.pieces.push_back(call.arguments);
  }
}

// Ids "id0", "id1", ... in the order calls start.
inline std::function<std::string()> CountingIds() {
  return [next = 0]() mutable { return absl::StrCat("id", next++); };
}

// Streams `text` cut into pieces of `lengths` (cycled; the last piece takes what is left).
inline CollectedStream StreamInPieces(std::string_view text, chat::ToolCallFormat format,
                                      const std::vector<size_t>& lengths) {
  chat::ToolCallStream stream(format, CountingIds());
  CollectedStream collected;
  size_t at = 0;
  for (size_t i = 0; at < text.size(); ++i) {
    const size_t length = lengths.empty() ? text.size() : lengths[i % lengths.size()];
    CollectDelta(stream.Push(text.substr(at, length)), collected);
    at += length;
  }
  CollectDelta(stream.Finish(), collected);
  collected.saw_tool_calls = stream.saw_tool_calls();
  return collected;
}

inline CollectedStream StreamWhole(std::string_view text, chat::ToolCallFormat format) {
  return StreamInPieces(text, format, {});
}

inline CollectedStream StreamBytewise(std::string_view text, chat::ToolCallFormat format) {
  return StreamInPieces(text, format, {1});
}

}  // namespace crossreg::testing

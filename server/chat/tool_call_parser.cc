#include "server/chat/tool_call_parser.h"

#include <optional>
#include <utility>

#include "server/chat/tool_call_text.h"

namespace crossreg::chat {
namespace {

// A block's body is a call if it holds one call object and whitespace around it.
std::optional<ParsedToolCall> ReadHermesBody(std::string_view body) {
  ToolCallObjectReader reader(HermesCallRules());
  const size_t read = reader.Feed(body);
  if (!reader.complete() || !IsAllJsonSpace(body.substr(read))) return std::nullopt;
  return ParsedToolCall{*reader.name(), reader.arguments()};
}

ParsedMessage ParseHermes(std::string_view text) {
  ParsedMessage message;
  // A run of calls with only whitespace between them leaves the whitespace before its first
  // call, and only where text follows the run and came before it.
  std::optional<std::string_view> separator;
  const auto append_content = [&](std::string_view piece) {
    if (piece.empty()) return;
    if (separator.has_value()) message.content.append(*separator);
    separator.reset();
    message.content.append(piece);
  };
  bool after_call = false;
  while (true) {
    const size_t open = text.find(kToolCallOpenTag);
    std::string_view before = text.substr(0, open);
    if (after_call) before = StripLeadingJsonSpace(before);
    if (open == std::string_view::npos) {
      append_content(before);
      return message;
    }
    const size_t body_start = open + kToolCallOpenTag.size();
    const size_t close = text.find(kToolCallCloseTag, body_start);
    std::string_view body = text.substr(body_start, close - body_start);
    // Cut off inside the close tag: the object can still be whole.
    if (close == std::string_view::npos) body.remove_suffix(PartialTagSuffixLength(body, kToolCallCloseTag));
    const size_t block_end = close == std::string_view::npos ? text.size() : close + kToolCallCloseTag.size();
    std::optional<ParsedToolCall> call = ReadHermesBody(body);
    if (call.has_value()) {
      const std::string_view text_before = StripTrailingJsonSpace(before);
      append_content(text_before);
      if (!separator.has_value()) {
        separator = message.content.empty() ? std::string_view() : before.substr(text_before.size());
      }
      message.tool_calls.push_back(*std::move(call));
    } else {
      append_content(text.substr(open - before.size(), block_end - (open - before.size())));
    }
    after_call = call.has_value();
    text.remove_prefix(block_end);
  }
}

ParsedMessage ParseLlama3(std::string_view text) {
  ParsedMessage all_content{std::string(text), {}};
  std::string_view rest = StripLeadingJsonSpace(text);
  if (rest.substr(0, kPythonTag.size()) == kPythonTag) rest = StripLeadingJsonSpace(rest.substr(kPythonTag.size()));
  if (rest.empty() || rest.front() != '{') return all_content;
  ParsedMessage message;
  while (true) {
    ToolCallObjectReader reader(Llama3CallRules());
    const size_t read = reader.Feed(rest);
    if (!reader.complete()) return all_content;
    message.tool_calls.push_back({*reader.name(), reader.arguments()});
    rest = StripLeadingJsonSpace(rest.substr(read));
    if (rest.empty()) return message;
    if (rest.front() != ';') return all_content;
    rest = StripLeadingJsonSpace(rest.substr(1));
    if (rest.empty()) return message;
  }
}

}  // namespace

ToolCallObjectRules HermesCallRules() {
  return {.arguments_may_be_string = true, .arguments_required = false, .other_keys_allowed = true};
}

ToolCallObjectRules Llama3CallRules() {
  return {.arguments_may_be_string = false, .arguments_required = true, .other_keys_allowed = false};
}

ParsedMessage ParseToolCalls(std::string_view text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return ParseHermes(text);
    case ToolCallFormat::kLlama3Json:
      return ParseLlama3(text);
  }
  return ParsedMessage{std::string(text), {}};
}

}  // namespace crossreg::chat

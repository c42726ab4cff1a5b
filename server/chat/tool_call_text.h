// Byte-level text rules shared by the whole-text and the streaming tool-call parsers, so
// that both make the same decision at the same byte, however the text was split.
#pragma once

#include <cstddef>
#include <string_view>

namespace crossreg::chat {

inline constexpr std::string_view kToolCallOpenTag = "<tool_call>";
inline constexpr std::string_view kToolCallCloseTag = "</tool_call>";
inline constexpr std::string_view kPythonTag = "<|python_tag|>";

// JSON's whitespace (space, tab, LF, CR); also what is trimmed from content around a call.
bool IsJsonSpace(char c);
bool IsAllJsonSpace(std::string_view text);
std::string_view StripLeadingJsonSpace(std::string_view text);
std::string_view StripTrailingJsonSpace(std::string_view text);

// The length of the longest proper suffix of `text` that is a prefix of `tag`: the bytes a
// stream must hold back because the next piece may complete the tag.
size_t PartialTagSuffixLength(std::string_view text, std::string_view tag);

// The length of `text` without a trailing UTF-8 sequence that is cut short, so that a
// streamed piece never ends inside a character (a JSON writer would reject it). Bytes that
// can never become a character are left in: they are the model's output as it is.
size_t CompleteUtf8PrefixLength(std::string_view text);

}  // namespace crossreg::chat

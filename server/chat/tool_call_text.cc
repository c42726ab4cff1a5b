#include "server/chat/tool_call_text.h"

#include <algorithm>

namespace crossreg::chat {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsAllJsonSpace(std::string_view text) { return std::all_of(text.begin(), text.end(), IsJsonSpace); }

std::string_view StripLeadingJsonSpace(std::string_view text) {
  while (!text.empty() && IsJsonSpace(text.front())) text.remove_prefix(1);
  return text;
}

std::string_view StripTrailingJsonSpace(std::string_view text) {
  while (!text.empty() && IsJsonSpace(text.back())) text.remove_suffix(1);
  return text;
}

size_t PartialTagSuffixLength(std::string_view text, std::string_view tag) {
  const size_t longest = std::min(text.size(), tag.size() - 1);
  for (size_t length = longest; length > 0; --length) {
    if (text.substr(text.size() - length) == tag.substr(0, length)) return length;
  }
  return 0;
}

size_t CompleteUtf8PrefixLength(std::string_view text) {
  // A character is at most 4 bytes, so only a lead byte among the last 3 can be cut short.
  const size_t size = text.size();
  for (size_t back = 1; back <= 3 && back <= size; ++back) {
    const auto byte = static_cast<unsigned char>(text[size - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t length = 1;
    if ((byte & 0xE0) == 0xC0) {
      length = 2;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4;
    }
    return back < length ? size - back : size;
  }
  return size;
}

}  // namespace crossreg::chat

#include "engine/tokenizer/utf8.h"

namespace crossreg::utf8 {
namespace {

// Expected length and the allowed range of the second byte (RFC 3629 table), which
// rules out overlong forms, surrogates and code points above U+10FFFF.
struct LeadInfo {
  size_t length = 0;  // 0: not a lead byte
  uint8_t second_min = 0x80;
  uint8_t second_max = 0xBF;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {};
}

}  // namespace

SequenceCheck CheckSequence(std::string_view bytes) {
  using Kind = SequenceCheck::Kind;
  if (bytes.empty()) return {Kind::kIncomplete, 0};
  const LeadInfo lead = Lead(static_cast<uint8_t>(bytes[0]));
  if (lead.length == 0) return {Kind::kInvalid, 1};
  if (lead.length == 1) return {Kind::kComplete, 1};
  for (size_t i = 1; i < lead.length; ++i) {
    if (i >= bytes.size()) return {Kind::kIncomplete, i};
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    const uint8_t lo = i == 1 ? lead.second_min : 0x80;
    const uint8_t hi = i == 1 ? lead.second_max : 0xBF;
    if (b < lo || b > hi) return {Kind::kInvalid, i};
  }
  return {Kind::kComplete, lead.length};
}

std::vector<std::string_view> SplitChars(std::string_view text) {
  std::vector<std::string_view> chars;
  chars.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const SequenceCheck check = CheckSequence(text.substr(i));
    const size_t n = check.kind == SequenceCheck::Kind::kComplete ? check.length : 1;
    chars.push_back(text.substr(i, n));
    i += n;
  }
  return chars;
}

bool IsValid(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const SequenceCheck check = CheckSequence(text.substr(i));
    if (check.kind != SequenceCheck::Kind::kComplete) return false;
    i += check.length;
  }
  return true;
}

size_t DecodeOne(std::string_view bytes, uint32_t* codepoint) {
  const SequenceCheck check = CheckSequence(bytes);
  if (check.kind != SequenceCheck::Kind::kComplete) return 0;
  const auto b0 = static_cast<uint8_t>(bytes[0]);
  uint32_t cp = check.length == 1   ? b0
                : check.length == 2 ? (b0 & 0x1F)
                : check.length == 3 ? (b0 & 0x0F)
                                    : (b0 & 0x07);
  for (size_t i = 1; i < check.length; ++i) {
    cp = (cp << 6) | (static_cast<uint8_t>(bytes[i]) & 0x3F);
  }
  *codepoint = cp;
  return check.length;
}

void AppendCodepoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace crossreg::utf8

// Small UTF-8 helpers shared by the tokenizers and the stream decoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace crossreg::utf8 {

// What the bytes at the start of a buffer hold.
struct SequenceCheck {
  enum class Kind { kComplete, kIncomplete, kInvalid };
  Kind kind = Kind::kInvalid;
  // kComplete: bytes of the character; kIncomplete: bytes present so far (a valid
  // prefix); kInvalid: bytes of the maximal invalid subpart (>= 1), to replace by U+FFFD.
  size_t length = 0;
};

// Classifies the sequence at the start of `bytes` (which must be non-empty).
SequenceCheck CheckSequence(std::string_view bytes);

// Splits `text` into characters; bytes that are not part of a valid character become
// one-byte pieces, so the pieces always concatenate back to `text`.
std::vector<std::string_view> SplitChars(std::string_view text);

bool IsValid(std::string_view text);

// Decodes the valid character at the start of `bytes`; returns its length (0 if invalid).
size_t DecodeOne(std::string_view bytes, uint32_t* codepoint);

void AppendCodepoint(uint32_t codepoint, std::string* out);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

}  // namespace crossreg::utf8

// Checks one JSON value a byte at a time (RFC 8259 as nlohmann::json accepts it, number
// range aside: strings must be UTF-8 without raw control characters, \u surrogates must
// pair). A streamed tool call uses it to know where its arguments end, and whether the text
// so far can still be JSON, without re-reading what it has seen: the verdict at each byte
// depends only on the bytes before it, so every split of a text gets the same one.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace crossreg::chat {

class JsonValueScanner {
 public:
  enum class Step {
    kMore,         // the byte is part of the value (or whitespace before it); not complete
    kComplete,     // the byte completes the value
    kEndedBefore,  // the value, a number, ended before this byte, which is not part of it
    kInvalid,      // no JSON value starts with the bytes so far; every later byte is too
  };

  Step Push(char byte);

 private:
  enum class State : uint8_t {
    kValue,                  // a value starts here (whitespace may come first)
    kValueOrArrayEnd,        // after '['
    kKeyOrObjectEnd,         // after '{'
    kKey,                    // after ',' in an object
    kColon,                  // after a key
    kAfterMember,            // after a value inside a container: ',' or the close
    kString,                 // inside a string (string_is_key_ says whether a key)
    kEscape,                 // after '\'
    kUnicodeHex,             // inside \uXXXX
    kLowSurrogateBackslash,  // after a high surrogate's \uXXXX: its low half must follow
    kLowSurrogateU,          // after that '\'
    kNumberMinus,            // '-'
    kNumberZero,             // a leading 0 (no more integer digits may follow)
    kNumberInteger,          // integer digits after 1-9
    kNumberPoint,            // '.' (a digit must follow)
    kNumberFraction,         // fraction digits
    kNumberExponent,         // 'e' or 'E'
    kNumberExponentSign,     // the exponent's sign (a digit must follow)
    kNumberExponentDigits,   // exponent digits
    kLiteral,                // inside true, false or null
    kComplete,
    kInvalid,
  };

  // Push picks one of these by state_: the bytes between a container's tokens, those of
  // an escape inside a string, those of a number.
  Step StructureByte(char byte);
  Step EscapeByte(char byte);
  Step NumberByte(char byte);
  Step StartValue(char byte);
  Step StartString(bool is_key);
  Step StringByte(unsigned char byte);
  Step UnicodeHexDigit(char byte);
  Step EndNumber(char byte);
  Step EndValue();
  Step CloseContainer(char close);
  Step Fail();

  State state_ = State::kValue;
  std::vector<char> open_containers_;  // '{' or '[', innermost last
  bool string_is_key_ = false;
  // UTF-8 inside a string: continuation bytes still due, and the range the next one must
  // fall in (narrower after E0, ED, F0, F4 to exclude overlong forms, surrogates, > U+10FFFF).
  int utf8_bytes_due_ = 0;
  unsigned char utf8_next_min_ = 0x80;
  unsigned char utf8_next_max_ = 0xBF;
  // \uXXXX: its value so far and digits read; whether it is the low half of a pair.
  uint32_t code_unit_ = 0;
  int hex_digits_ = 0;
  bool low_surrogate_due_ = false;
  std::string_view literal_;  // the literal being matched
  size_t literal_matched_ = 0;
};

}  // namespace crossreg::chat

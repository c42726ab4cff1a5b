#include "server/chat/tool_call_json_scanner.h"

#include "server/chat/tool_call_text.h"

namespace crossreg::chat {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

JsonValueScanner::Step JsonValueScanner::Push(char byte) {
  switch (state_) {
    case State::kValue:
    case State::kValueOrArrayEnd:
    case State::kKeyOrObjectEnd:
    case State::kKey:
    case State::kColon:
    case State::kAfterMember:
      return StructureByte(byte);
    case State::kString:
      return StringByte(static_cast<unsigned char>(byte));
    case State::kEscape:
    case State::kUnicodeHex:
    case State::kLowSurrogateBackslash:
    case State::kLowSurrogateU:
      return EscapeByte(byte);
    case State::kNumberMinus:
    case State::kNumberZero:
    case State::kNumberInteger:
    case State::kNumberPoint:
    case State::kNumberFraction:
    case State::kNumberExponent:
    case State::kNumberExponentSign:
    case State::kNumberExponentDigits:
      return NumberByte(byte);
    case State::kLiteral:
      if (byte != literal_[literal_matched_]) return Fail();
      if (++literal_matched_ < literal_.size()) return Step::kMore;
      return EndValue();
    case State::kComplete:  // a byte after a complete value is not part of it
    case State::kInvalid:
      return Fail();
  }
  return Fail();
}

JsonValueScanner::Step JsonValueScanner::StructureByte(char byte) {
  switch (state_) {
    case State::kValue:
      return StartValue(byte);
    case State::kValueOrArrayEnd:
      if (byte == ']') return CloseContainer(byte);
      return StartValue(byte);
    case State::kKeyOrObjectEnd:
      if (IsJsonSpace(byte)) return Step::kMore;
      if (byte == '}') return CloseContainer(byte);
      if (byte == '"') return StartString(/*is_key=*/true);
      return Fail();
    case State::kKey:
      if (IsJsonSpace(byte)) return Step::kMore;
      if (byte == '"') return StartString(/*is_key=*/true);
      return Fail();
    case State::kColon:
      if (IsJsonSpace(byte)) return Step::kMore;
      if (byte != ':') return Fail();
      state_ = State::kValue;
      return Step::kMore;
    case State::kAfterMember:
      if (IsJsonSpace(byte)) return Step::kMore;
      if (byte == ',') {
        state_ = open_containers_.back() == '{' ? State::kKey : State::kValue;
        return Step::kMore;
      }
      if (byte == '}' || byte == ']') return CloseContainer(byte);
      return Fail();
    default:
      return Fail();
  }
}

JsonValueScanner::Step JsonValueScanner::EscapeByte(char byte) {
  switch (state_) {
    case State::kEscape:
      switch (byte) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          state_ = State::kString;
          return Step::kMore;
        case 'u':
          state_ = State::kUnicodeHex;
          code_unit_ = 0;
          hex_digits_ = 0;
          return Step::kMore;
        default:
          return Fail();
      }
    case State::kUnicodeHex:
      return UnicodeHexDigit(byte);
    case State::kLowSurrogateBackslash:
      if (byte != '\\') return Fail();
      state_ = State::kLowSurrogateU;
      return Step::kMore;
    case State::kLowSurrogateU:
      if (byte != 'u') return Fail();
      state_ = State::kUnicodeHex;
      code_unit_ = 0;
      hex_digits_ = 0;
      return Step::kMore;
    default:
      return Fail();
  }
}

JsonValueScanner::Step JsonValueScanner::NumberByte(char byte) {
  switch (state_) {
    case State::kNumberMinus:
      if (byte == '0') {
        state_ = State::kNumberZero;
      } else if (IsDigit(byte)) {
        state_ = State::kNumberInteger;
      } else {
        return Fail();
      }
      return Step::kMore;
    case State::kNumberZero:
    case State::kNumberInteger:
      if (state_ == State::kNumberInteger && IsDigit(byte)) return Step::kMore;
      if (byte == '.') {
        state_ = State::kNumberPoint;
        return Step::kMore;
      }
      if (byte == 'e' || byte == 'E') {
        state_ = State::kNumberExponent;
        return Step::kMore;
      }
      return EndNumber(byte);
    case State::kNumberPoint:
      if (!IsDigit(byte)) return Fail();
      state_ = State::kNumberFraction;
      return Step::kMore;
    case State::kNumberFraction:
      if (IsDigit(byte)) return Step::kMore;
      if (byte == 'e' || byte == 'E') {
        state_ = State::kNumberExponent;
        return Step::kMore;
      }
      return EndNumber(byte);
    case State::kNumberExponent:
      if (byte == '+' || byte == '-') {
        state_ = State::kNumberExponentSign;
        return Step::kMore;
      }
      if (!IsDigit(byte)) return Fail();
      state_ = State::kNumberExponentDigits;
      return Step::kMore;
    case State::kNumberExponentSign:
      if (!IsDigit(byte)) return Fail();
      state_ = State::kNumberExponentDigits;
      return Step::kMore;
    case State::kNumberExponentDigits:
      if (IsDigit(byte)) return Step::kMore;
      return EndNumber(byte);
    default:
      return Fail();
  }
}

JsonValueScanner::Step JsonValueScanner::StartValue(char byte) {
  switch (byte) {
    case ' ':
    case '\t':
    case '\n':
    case '\r':
      return Step::kMore;
    case '{':
      open_containers_.push_back('{');
      state_ = State::kKeyOrObjectEnd;
      return Step::kMore;
    case '[':
      open_containers_.push_back('[');
      state_ = State::kValueOrArrayEnd;
      return Step::kMore;
    case '"':
      return StartString(/*is_key=*/false);
    case '-':
      state_ = State::kNumberMinus;
      return Step::kMore;
    case '0':
      state_ = State::kNumberZero;
      return Step::kMore;
    case 't':
      literal_ = "true";
      break;
    case 'f':
      literal_ = "false";
      break;
    case 'n':
      literal_ = "null";
      break;
    default:
      if (!IsDigit(byte)) return Fail();
      state_ = State::kNumberInteger;
      return Step::kMore;
  }
  state_ = State::kLiteral;
  literal_matched_ = 1;
  return Step::kMore;
}

JsonValueScanner::Step JsonValueScanner::StartString(bool is_key) {
  state_ = State::kString;
  string_is_key_ = is_key;
  return Step::kMore;
}

JsonValueScanner::Step JsonValueScanner::StringByte(unsigned char byte) {
  if (utf8_bytes_due_ > 0) {
    if (byte < utf8_next_min_ || byte > utf8_next_max_) return Fail();
    --utf8_bytes_due_;
    utf8_next_min_ = 0x80;
    utf8_next_max_ = 0xBF;
    return Step::kMore;
  }
  if (byte == '"') {
    if (!string_is_key_) return EndValue();
    state_ = State::kColon;
    return Step::kMore;
  }
  if (byte == '\\') {
    state_ = State::kEscape;
    return Step::kMore;
  }
  if (byte < 0x20) return Fail();
  if (byte < 0x80) return Step::kMore;
  // A lead byte: Unicode's table of well-formed UTF-8 byte sequences.
  if (byte >= 0xC2 && byte <= 0xDF) {
    utf8_bytes_due_ = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    utf8_bytes_due_ = 2;
    if (byte == 0xE0) utf8_next_min_ = 0xA0;
    if (byte == 0xED) utf8_next_max_ = 0x9F;
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    utf8_bytes_due_ = 3;
    if (byte == 0xF0) utf8_next_min_ = 0x90;
    if (byte == 0xF4) utf8_next_max_ = 0x8F;
  } else {
    return Fail();
  }
  return Step::kMore;
}

JsonValueScanner::Step JsonValueScanner::UnicodeHexDigit(char byte) {
  const int digit = HexValue(byte);
  if (digit < 0) return Fail();
  code_unit_ = code_unit_ * 16 + static_cast<uint32_t>(digit);
  if (++hex_digits_ < 4) return Step::kMore;
  const bool high = code_unit_ >= 0xD800 && code_unit_ <= 0xDBFF;
  const bool low = code_unit_ >= 0xDC00 && code_unit_ <= 0xDFFF;
  if (low_surrogate_due_) {
    if (!low) return Fail();
    low_surrogate_due_ = false;
    state_ = State::kString;
    return Step::kMore;
  }
  if (low) return Fail();
  if (high) {
    low_surrogate_due_ = true;
    state_ = State::kLowSurrogateBackslash;
    return Step::kMore;
  }
  state_ = State::kString;
  return Step::kMore;
}

JsonValueScanner::Step JsonValueScanner::EndNumber(char byte) {
  if (open_containers_.empty()) {
    state_ = State::kComplete;
    return Step::kEndedBefore;
  }
  state_ = State::kAfterMember;
  return Push(byte);
}

JsonValueScanner::Step JsonValueScanner::EndValue() {
  if (open_containers_.empty()) {
    state_ = State::kComplete;
    return Step::kComplete;
  }
  state_ = State::kAfterMember;
  return Step::kMore;
}

JsonValueScanner::Step JsonValueScanner::CloseContainer(char close) {
  const char open = open_containers_.back();
  if ((open == '{') != (close == '}')) return Fail();
  open_containers_.pop_back();
  return EndValue();
}

JsonValueScanner::Step JsonValueScanner::Fail() {
  state_ = State::kInvalid;
  return Step::kInvalid;
}

}  // namespace crossreg::chat

#include "server/chat/jinja_lexer.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "\r\n" and "\r" become "\n", and one trailing newline goes (keep_trailing_newline off).
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// A string literal's body decoded as jinja2 does: Python's "unicode-escape" codec over
// the body with its non-ASCII characters first written as \x, \u or \U escapes.
absl::StatusOr<std::string> DecodeStringLiteral(std::string_view body) {
  std::string ascii;
  ascii.reserve(body.size());
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t at = 0; at < body.size();) {
    const char32_t cp = NextCodePoint(body, &at);
    if (cp < 0x80) {
      ascii.push_back(static_cast<char>(cp));
      continue;
    }
    const int digits = cp <= 0xFF ? 2 : cp <= 0xFFFF ? 4 : 8;
    ascii += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) ascii.push_back(kHex[(cp >> shift) & 15]);
  }
  std::string out;
  out.reserve(ascii.size());
  for (size_t i = 0; i < ascii.size(); ++i) {
    if (ascii[i] != '\\') {
      out.push_back(ascii[i]);
      continue;
    }
    if (++i >= ascii.size()) return absl::InvalidArgumentError("\\ at end of string");
    const char c = ascii[i];
    char32_t cp;
    switch (c) {
      case '\n':
        continue;
      case '\\':
      case '\'':
      case '"':
        out.push_back(c);
        continue;
      case 'a':
        out.push_back('\a');
        continue;
      case 'b':
        out.push_back('\b');
        continue;
      case 'f':
        out.push_back('\f');
        continue;
      case 'n':
        out.push_back('\n');
        continue;
      case 'r':
        out.push_back('\r');
        continue;
      case 't':
        out.push_back('\t');
        continue;
      case 'v':
        out.push_back('\v');
        continue;
      case 'x':
      case 'u':
      case 'U': {
        const int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        cp = 0;
        for (int k = 0; k < digits; ++k) {
          const int v = i + 1 < ascii.size() ? HexValue(ascii[i + 1]) : -1;
          if (v < 0) {
            return absl::InvalidArgumentError(c == 'x' ? "truncated \\xXX escape"
                                              : c == 'u' ? "truncated \\uXXXX escape"
                                                         : "truncated \\UXXXXXXXX escape");
          }
          cp = cp * 16 + static_cast<char32_t>(v);
          ++i;
        }
        break;
      }
      case 'N':
        return absl::InvalidArgumentError("\\N{...} escapes in string literals are not supported");
      default:
        if (c >= '0' && c <= '7') {
          cp = static_cast<char32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<char32_t>(ascii[++i] - '0');
          }
          break;
        }
        out.push_back('\\');  // Python keeps an unknown escape as written
        out.push_back(c);
        continue;
    }
    if (cp > 0x10FFFF) return absl::InvalidArgumentError("illegal Unicode character");
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      return absl::InvalidArgumentError("a surrogate code point in a string literal is not supported");
    }
    AppendUtf8(cp, &out);
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options) : src_(NormalizeNewlines(source)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      if (auto status = LexText(); !status.ok()) return status;
    }
    Emit(TokenKind::kEnd, src_.size());
    return std::move(tokens_);
  }

 private:
  absl::Status Error(size_t at, std::string_view what) const {
    const auto [line, column] = LineAndColumn(at);
    return absl::InvalidArgumentError(absl::StrCat("line ", line, ", column ", column, ": ", std::string(what)));
  }

  std::pair<int, int> LineAndColumn(size_t at) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t start = *std::prev(it);
    const auto line = static_cast<int>(it - line_starts_.begin());
    const auto column = static_cast<int>(CodePointCount(std::string_view(src_).substr(start, at - start))) + 1;
    return {line, column};
  }

  Token& Emit(TokenKind kind, size_t at, std::string text = {}) {
    Token token;
    token.kind = kind;
    token.text = std::move(text);
    // Tokens come in source order: the column is counted on from the last token's, so
    // a long single-line template still lexes in linear time.
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t line_start = *std::prev(it);
    if (line_start != column_line_start_ || at < column_offset_) {
      column_line_start_ = line_start;
      column_offset_ = line_start;
      column_ = 1;
    }
    column_ += static_cast<int>(CodePointCount(std::string_view(src_).substr(column_offset_, at - column_offset_)));
    column_offset_ = at;
    token.line = static_cast<int>(it - line_starts_.begin());
    token.column = column_;
    tokens_.push_back(std::move(token));
    return tokens_.back();
  }

  bool SpaceAt(size_t at, size_t* next) const {
    if (at >= src_.size()) return false;
    size_t probe = at;
    if (!IsPythonSpace(NextCodePoint(src_, &probe))) return false;
    *next = probe;
    return true;
  }

  size_t SkipSpace(size_t at) const {
    size_t next;
    while (SpaceAt(at, &next)) at = next;
    return at;
  }

  bool At(size_t at, std::string_view text) const { return src_.compare(at, text.size(), text) == 0; }

  // Text before a tag, as the tag's whitespace control leaves it: "-" strips all
  // whitespace; otherwise lstrip_blocks strips the spaces and tabs that alone precede a
  // block or comment tag on its line.
  std::string_view StripBefore(std::string_view text, char sign, bool variable) const {
    if (sign == '-') {
      size_t end = text.size();
      while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t probe = start;
        if (!IsPythonSpace(NextCodePoint(text, &probe))) break;
        end = start;
      }
      return text.substr(0, end);
    }
    if (sign == '+' || !options_.lstrip_blocks || variable) return text;
    const size_t line_start = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
    if (line_start == 0 && !line_starting_) return text;
    if (line_start == text.size()) return text;
    for (size_t at = line_start; at < text.size();) {
      if (!IsPythonSpace(NextCodePoint(text, &at))) return text;
    }
    return text.substr(0, line_start);
  }

  void EmitData(size_t at, std::string_view text) {
    if (!text.empty()) Emit(TokenKind::kData, at, std::string(text));
  }

  // The end of "{% raw %}" at `at`, or npos.
  size_t RawBeginEnd(size_t at) const {
    size_t p = at + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpace(p);
    if (!At(p, "raw")) return std::string::npos;
    p = SkipSpace(p + 3);
    if (At(p, "-%}")) return SkipSpace(p + 3);
    if (At(p, "%}")) return p + 2;
    return std::string::npos;
  }

  absl::Status LexText() {
    size_t k = pos_;
    while (true) {
      k = src_.find('{', k);
      if (k == std::string::npos || (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#'))) {
        break;
      }
      ++k;
    }
    if (k == std::string::npos) {
      EmitData(pos_, std::string_view(src_).substr(pos_));
      pos_ = src_.size();
      return absl::OkStatus();
    }
    const char opener = src_[k + 1];
    const char sign = k + 2 < src_.size() && (src_[k + 2] == '-' || src_[k + 2] == '+') ? src_[k + 2] : 0;
    const size_t raw_end = opener == '%' ? RawBeginEnd(k) : std::string::npos;
    EmitData(pos_, StripBefore(std::string_view(src_).substr(pos_, k - pos_), sign, opener == '{'));
    if (raw_end != std::string::npos) {
      pos_ = raw_end;
      line_starting_ = src_[raw_end - 1] == '\n';
      return LexRaw(k);
    }
    line_starting_ = false;
    pos_ = k + 2 + (sign != 0 ? 1 : 0);
    if (opener == '#') return LexComment(k);
    Emit(opener == '{' ? TokenKind::kVariableBegin : TokenKind::kBlockBegin, k);
    return LexTag(opener == '%');
  }

  absl::Status LexComment(size_t begin) {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) return Error(begin, "Missing end of comment tag");
    size_t end = close + 2;
    if (close > pos_ && src_[close - 1] == '-') {
      end = SkipSpace(end);
    } else if (!(close > pos_ && src_[close - 1] == '+') && options_.trim_blocks && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    pos_ = end;
    line_starting_ = src_[end - 1] == '\n';
    return absl::OkStatus();
  }

  absl::Status LexRaw(size_t begin) {
    for (size_t j = src_.find("{%", pos_); j != std::string::npos; j = src_.find("{%", j + 1)) {
      size_t p = j + 2;
      const char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign != 0) ++p;
      p = SkipSpace(p);
      if (!At(p, "endraw")) continue;
      p = SkipSpace(p + 6);
      size_t end;
      if (At(p, "+%}")) {
        end = p + 3;
      } else if (At(p, "-%}")) {
        end = SkipSpace(p + 3);
      } else if (At(p, "%}")) {
        end = p + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      EmitData(pos_, StripBefore(std::string_view(src_).substr(pos_, j - pos_), sign, false));
      pos_ = end;
      line_starting_ = src_[end - 1] == '\n';
      return absl::OkStatus();
    }
    return Error(begin, "Missing end of raw directive");
  }

  // The tokens inside {{ }} or {% %}, through its end.
  absl::Status LexTag(bool block) {
    std::vector<char> brackets;
    while (pos_ < src_.size()) {
      if (brackets.empty()) {
        size_t end = std::string::npos;
        if (block) {
          if (At(pos_, "+%}")) {
            end = pos_ + 3;
          } else if (At(pos_, "-%}")) {
            end = SkipSpace(pos_ + 3);
          } else if (At(pos_, "%}")) {
            end = pos_ + 2;
            if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
          }
        } else if (At(pos_, "-}}")) {
          end = SkipSpace(pos_ + 3);
        } else if (At(pos_, "}}")) {
          end = pos_ + 2;
        }
        if (end != std::string::npos) {
          Emit(block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd, pos_);
          pos_ = end;
          line_starting_ = src_[end - 1] == '\n';
          return absl::OkStatus();
        }
      }
      if (auto status = LexTagToken(&brackets); !status.ok()) return status;
    }
    return absl::OkStatus();  // the parser reports the unfinished tag
  }

  // (\d+_)*\d+ from `at`: its end, or `at` when no digit is there.
  size_t DigitsEnd(size_t at) const {
    size_t p = at;
    while (p < src_.size() && IsDigit(src_[p])) ++p;
    if (p == at) return at;
    while (p + 1 < src_.size() && src_[p] == '_' && IsDigit(src_[p + 1])) {
      ++p;
      while (p < src_.size() && IsDigit(src_[p])) ++p;
    }
    return p;
  }

  // jinja2's float_re at `at`: its end, or npos.
  size_t FloatEnd(size_t at) const {
    if (at > 0 && src_[at - 1] == '.') return std::string::npos;
    const size_t whole = DigitsEnd(at);
    if (whole == at) return std::string::npos;
    size_t fraction = std::string::npos;
    if (whole < src_.size() && src_[whole] == '.' && DigitsEnd(whole + 1) > whole + 1) fraction = DigitsEnd(whole + 1);
    size_t e = fraction != std::string::npos ? fraction : whole;
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t p = e + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      const size_t exponent = DigitsEnd(p);
      if (exponent > p) return exponent;
    }
    return fraction;
  }

  // jinja2's integer_re at `at`: its end and base, or npos.
  size_t IntegerEnd(size_t at, int* base) const {
    const auto run = [&](size_t p, int b) {
      size_t q = p;
      while (true) {
        size_t r = q;
        if (r < src_.size() && src_[r] == '_') ++r;
        if (r >= src_.size()) break;
        const int v = HexValue(src_[r]);
        if (v < 0 || v >= b) break;
        q = r + 1;
      }
      return q;
    };
    if (src_[at] == '0' && at + 1 < src_.size()) {
      const char p = static_cast<char>(src_[at + 1] | 0x20);
      const int b = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 0;
      if (b != 0) {
        const size_t end = run(at + 2, b);
        if (end > at + 2) {
          *base = b;
          return end;
        }
      }
    }
    *base = 10;
    if (src_[at] >= '1' && src_[at] <= '9') return run(at + 1, 10);
    if (src_[at] == '0') {
      size_t q = at + 1;
      while (true) {
        size_t r = q;
        if (r < src_.size() && src_[r] == '_') ++r;
        if (r >= src_.size() || src_[r] != '0') break;
        q = r + 1;
      }
      return q;
    }
    return std::string::npos;
  }

  absl::Status LexTagToken(std::vector<char>* brackets) {
    const size_t at = pos_;
    const char c = src_[at];
    if (size_t next; SpaceAt(at, &next)) {
      pos_ = SkipSpace(at);
      return absl::OkStatus();
    }
    if (IsDigit(c)) {
      if (const size_t end = FloatEnd(at); end != std::string::npos) {
        std::string digits;
        for (size_t i = at; i < end; ++i) {
          if (src_[i] != '_') digits.push_back(src_[i]);
        }
        Token& token = Emit(TokenKind::kFloat, at, src_.substr(at, end - at));
        const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), token.number);
        if (result.ec == std::errc::result_out_of_range) token.number = std::strtod(digits.c_str(), nullptr);
        pos_ = end;
        return absl::OkStatus();
      }
      int base = 10;
      const size_t end = IntegerEnd(at, &base);
      if (end != std::string::npos) {
        auto value = ParsePythonInt(std::string_view(src_).substr(at, end - at), 0);
        if (!value.ok()) return Error(at, "an integer literal beyond 64 bits is not supported");
        Emit(TokenKind::kInteger, at, src_.substr(at, end - at)).integer = *value;
        pos_ = end;
        return absl::OkStatus();
      }
    }
    if (IsNameStart(c)) {
      size_t end = at;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      Emit(TokenKind::kName, at, src_.substr(at, end - at));
      pos_ = end;
      return absl::OkStatus();
    }
    if (c == '\'' || c == '"') {
      size_t p = at + 1;
      while (p < src_.size() && src_[p] != c) p += src_[p] == '\\' ? 2 : 1;
      if (p >= src_.size()) return Error(at, absl::StrCat("unexpected char ", PythonStringRepr(std::string(1, c)), " (an unterminated string)"));
      auto decoded = DecodeStringLiteral(std::string_view(src_).substr(at + 1, p - at - 1));
      if (!decoded.ok()) return Error(at, std::string(decoded.status().message()));
      Emit(TokenKind::kString, at, *std::move(decoded));
      pos_ = p + 1;
      return absl::OkStatus();
    }
    static constexpr std::string_view kOperators[] = {"**", "//", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~",
                                                      "[",  "]",  "(",  ")",  "{",  "}",  ">", "<", "=", ".", ":", "|",
                                                      ",",  ";"};
    for (std::string_view op : kOperators) {
      if (!At(at, op)) continue;
      if (op == "(" || op == "[" || op == "{") {
        brackets->push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (brackets->empty()) return Error(at, absl::StrCat("unexpected '", std::string(op), "'"));
        const char expected = brackets->back();
        brackets->pop_back();
        if (expected != op[0]) {
          return Error(at, absl::StrCat("unexpected '", std::string(op), "', expected '", std::string(1, expected), "'"));
        }
      }
      Emit(TokenKind::kOperator, at, std::string(op));
      pos_ = at + op.size();
      return absl::OkStatus();
    }
    size_t end = at;
    const char32_t cp = NextCodePoint(src_, &end);
    std::string shown;
    AppendUtf8(cp, &shown);
    return Error(at, absl::StrCat("unexpected char ", PythonStringRepr(shown)));
  }

  const std::string src_;
  const LexerOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  size_t column_line_start_ = 0;
  size_t column_offset_ = 0;
  int column_ = 1;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options) {
  if (!IsValidUtf8(source)) return absl::InvalidArgumentError("line 1, column 1: the template is not valid UTF-8");
  return Lexer(source, options).Run();
}

}  // namespace crossreg::jinja

#include "server/chat/jinja_python_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

std::string_view StripPythonSpace(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t at = begin;
    if (!IsPythonSpace(NextCodePoint(text, &at))) break;
    begin = at;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t at = start;
    if (!IsPythonSpace(NextCodePoint(text, &at))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

// Digits in `base` where single underscores may separate digits (and follow a base
// prefix, when `after_prefix`).
bool ValidDigits(std::string_view digits, int base, bool after_prefix) {
  if (digits.empty()) return false;
  bool last_digit = after_prefix;
  for (char c : digits) {
    if (c == '_') {
      if (!last_digit) return false;
      last_digit = false;
    } else if (DigitValue(c) < base) {
      last_digit = true;
    } else {
      return false;
    }
  }
  return last_digit;
}

absl::Status InvalidFloatLiteral(std::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat("could not convert string to float: ", PythonStringRepr(text)));
}

// One conversion of a %-format: "%-08.3f" parsed.
struct PercentSpec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char conversion = 0;
};

std::string Pad(std::string text, const PercentSpec& spec) {
  const size_t length = CodePointCount(text);
  if (spec.width < 0 || length >= static_cast<size_t>(spec.width)) return text;
  const std::string fill(static_cast<size_t>(spec.width) - length, ' ');
  return spec.flags.find('-') != std::string::npos ? text + fill : fill + text;
}

std::string CFormatSpec(const PercentSpec& spec, std::string_view length_and_conversion) {
  std::string c = "%" + spec.flags;
  if (spec.width >= 0) absl::StrAppend(&c, spec.width);
  if (spec.precision >= 0) absl::StrAppend(&c, ".", spec.precision);
  c.append(length_and_conversion);
  return c;
}

absl::StatusOr<std::string> FormatOne(const PercentSpec& spec, const Value& arg) {
  switch (spec.conversion) {
    case 's':
    case 'r': {
      auto text = spec.conversion == 's' ? ToPythonStr(arg) : ToPythonRepr(arg);
      if (!text.ok()) return text.status();
      std::string out = *text;
      if (spec.precision >= 0) out.resize(ByteOffsetOfCodePoint(out, static_cast<size_t>(spec.precision)));
      return Pad(std::move(out), spec);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
    case 'c': {
      int64_t n;
      if (arg.is_integral()) {
        n = arg.AsInt();
      } else if (arg.kind() == Value::Kind::kFloat && spec.conversion != 'x' && spec.conversion != 'X' &&
                 spec.conversion != 'o' && spec.conversion != 'c') {
        const double d = std::trunc(arg.AsDouble());
        if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) {
          return absl::InvalidArgumentError("%d format: the number does not fit 64 bits");
        }
        n = static_cast<int64_t>(d);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("%", std::string(1, spec.conversion), " format: a number is required, not ", arg.TypeName()));
      }
      if (spec.conversion == 'c') {
        if (n < 0 || n > 0x10FFFF || (n >= 0xD800 && n <= 0xDFFF)) {
          return absl::InvalidArgumentError("%c arg not in range(0x110000)");
        }
        std::string ch;
        AppendUtf8(static_cast<char32_t>(n), &ch);
        return Pad(ch, spec);
      }
      const char* conversion = spec.conversion == 'x' ? "llx" : spec.conversion == 'X' ? "llX"
                               : spec.conversion == 'o' ? "llo" : "lld";
      std::string flags = spec.flags;
      if (spec.conversion == 'o' && flags.find('#') != std::string::npos) {
        return absl::InvalidArgumentError("%#o is not supported");
      }
      char buffer[128];
      const std::string c = CFormatSpec(spec, conversion);
      const bool negative_hex = n < 0 && spec.conversion != 'd' && spec.conversion != 'i' && spec.conversion != 'u';
      if (negative_hex) return absl::InvalidArgumentError("%x and %o of a negative number are not supported");
      std::snprintf(buffer, sizeof buffer, c.c_str(), static_cast<long long>(n));
      return std::string(buffer);
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!arg.is_number()) {
        return absl::InvalidArgumentError(absl::StrCat("must be real number, not ", arg.TypeName()));
      }
      const double d = arg.AsDouble();
      if (!std::isfinite(d)) return Pad(PythonFloatRepr(d), spec);
      char buffer[512];
      PercentSpec bounded = spec;
      if (bounded.precision > 100) return absl::InvalidArgumentError("a precision over 100 is not supported");
      const std::string c = CFormatSpec(bounded, std::string(1, spec.conversion));
      std::snprintf(buffer, sizeof buffer, c.c_str(), d);
      return std::string(buffer);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported format character '", std::string(1, spec.conversion), "'"));
  }
}

}  // namespace

std::string PythonFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));
  std::string out;
  if (text.front() == '-') {
    out = "-";
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int exponent = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exponent);
  // Python writes the decimal point's position in fixed notation from 1e-4 up to 1e16.
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const size_t integer_digits = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= integer_digits) {
        out.append(digits);
        out.append(integer_digits - digits.size(), '0');
        out.append(".0");
      } else {
        out.append(digits, 0, integer_digits);
        out.push_back('.');
        out.append(digits, integer_digits, std::string::npos);
      }
    } else {
      out.append("0.");
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out.append(digits);
    }
    return out;
  }
  out.append(digits, 0, 1);
  if (digits.size() > 1) {
    out.push_back('.');
    out.append(digits, 1, std::string::npos);
  }
  const int magnitude = std::abs(exponent);
  absl::StrAppend(&out, "e", exponent < 0 ? "-" : "+", magnitude < 10 ? "0" : "", magnitude);
  return out;
}

std::string PythonStringRepr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(1, quote);
  for (size_t at = 0; at < text.size();) {
    const size_t start = at;
    const char32_t cp = NextCodePoint(text, &at);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += {'\\', 'x', kHex[cp >> 4], kHex[cp & 15]};
    } else if (cp < 0x7F || IsPrintable(cp)) {
      out.append(text.substr(start, at - start));
    } else if (cp <= 0xFF) {
      out += {'\\', 'x', kHex[cp >> 4], kHex[cp & 15]};
    } else if (cp <= 0xFFFF) {
      out += {'\\', 'u', kHex[(cp >> 12) & 15], kHex[(cp >> 8) & 15], kHex[(cp >> 4) & 15], kHex[cp & 15]};
    } else {
      out += "\\U";
      for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(cp >> shift) & 15]);
    }
  }
  out.push_back(quote);
  return out;
}

absl::StatusOr<int64_t> ParsePythonInt(std::string_view text, int base) {
  const auto invalid = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid literal for int() with base ", base, ": ", PythonStringRepr(text)));
  };
  if (base != 0 && (base < 2 || base > 36)) return absl::InvalidArgumentError("int() base must be >= 2 and <= 36, or 0");
  std::string_view rest = StripPythonSpace(text);
  bool negative = false;
  if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
    negative = rest[0] == '-';
    rest.remove_prefix(1);
  }
  int effective = base;
  bool after_prefix = false;
  if (rest.size() >= 2 && rest[0] == '0') {
    const char p = static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(rest[1])));
    const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      effective = prefixed;
      after_prefix = true;
      rest.remove_prefix(2);
    }
  }
  if (effective == 0) {
    effective = 10;
    // Base 0 reads a decimal literal as Python source would: no leading zeros.
    if (rest.size() > 1 && rest[0] == '0') {
      for (char c : rest) {
        if (c != '0' && c != '_') return invalid();
      }
    }
  }
  if (!ValidDigits(rest, effective, after_prefix)) return invalid();
  uint64_t magnitude = 0;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  for (char c : rest) {
    if (c == '_') continue;
    const auto digit = static_cast<uint64_t>(DigitValue(c));
    if (magnitude > (limit - digit) / static_cast<uint64_t>(effective)) {
      return absl::InvalidArgumentError(absl::StrCat("the integer ", PythonStringRepr(text), " does not fit 64 bits"));
    }
    magnitude = magnitude * static_cast<uint64_t>(effective) + digit;
  }
  if (negative) return magnitude == (uint64_t{1} << 63) ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(magnitude);
  return static_cast<int64_t>(magnitude);
}

absl::StatusOr<double> ParsePythonFloat(std::string_view text) {
  std::string_view rest = StripPythonSpace(text);
  bool negative = false;
  if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
    negative = rest[0] == '-';
    rest.remove_prefix(1);
  }
  std::string lower(rest);
  for (char& c : lower) c = static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(c)));
  if (lower == "inf" || lower == "infinity") return negative ? -HUGE_VAL : HUGE_VAL;
  if (lower == "nan") return negative ? -std::nan("") : std::nan("");
  // digits [. digits] [e [sign] digits], at least one digit in the mantissa.
  const size_t e = lower.find('e');
  const std::string_view mantissa = std::string_view(rest).substr(0, e);
  const size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return InvalidFloatLiteral(text);
  if ((!whole.empty() && !ValidDigits(whole, 10, false)) || (!fraction.empty() && !ValidDigits(fraction, 10, false))) {
    return InvalidFloatLiteral(text);
  }
  if (e != std::string::npos) {
    std::string_view exponent = std::string_view(rest).substr(e + 1);
    if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) exponent.remove_prefix(1);
    if (!ValidDigits(exponent, 10, false)) return InvalidFloatLiteral(text);
  }
  std::string plain;
  for (char c : rest) {
    if (c != '_') plain.push_back(c);
  }
  double value = 0;
  const auto result = std::from_chars(plain.data(), plain.data() + plain.size(), value);
  if (result.ec == std::errc::result_out_of_range) {
    value = std::strtod(plain.c_str(), nullptr);  // ±HUGE_VAL or 0, as Python gives
  } else if (result.ec != std::errc() || result.ptr != plain.data() + plain.size()) {
    return InvalidFloatLiteral(text);
  }
  return negative ? -value : value;
}

absl::StatusOr<std::string> PercentFormat(std::string_view format, const Value& args) {
  std::vector<Value> positional;
  const bool is_tuple = args.is_list(SequenceKind::kTuple);
  if (is_tuple) {
    positional = args.AsList().items;
  } else {
    positional.push_back(args);
  }
  const bool mapping = args.kind() == Value::Kind::kDict;
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) return absl::InvalidArgumentError("incomplete format");
    if (format[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string_view::npos) return absl::InvalidArgumentError("incomplete format key");
      if (!mapping) return absl::InvalidArgumentError("format requires a mapping");
      const std::string key(format.substr(i + 1, close - i - 1));
      arg = args.AsDict().FindString(key);
      if (arg == nullptr) return absl::InvalidArgumentError(absl::StrCat("KeyError: ", PythonStringRepr(key)));
      used_mapping = true;
      i = close + 1;
    }
    PercentSpec spec;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos) {
      spec.flags.push_back(format[i++]);
    }
    if (i < format.size() && format[i] == '*') return absl::InvalidArgumentError("'*' in a format is not supported");
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
      spec.width = std::max(spec.width, 0) * 10 + (format[i++] - '0');
      if (spec.width > 10000) return absl::InvalidArgumentError("a format width over 10000 is not supported");
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        spec.precision = spec.precision * 10 + (format[i++] - '0');
        if (spec.precision > 10000) return absl::InvalidArgumentError("a format precision over 10000 is not supported");
      }
    }
    if (i >= format.size()) return absl::InvalidArgumentError("incomplete format");
    spec.conversion = format[i];
    if (arg == nullptr) {
      if (next >= positional.size()) return absl::InvalidArgumentError("not enough arguments for format string");
      arg = &positional[next++];
    }
    auto piece = FormatOne(spec, *arg);
    if (!piece.ok()) return piece.status();
    out += *piece;
  }
  if (!used_mapping && next < positional.size() && !(mapping && next == 0)) {
    return absl::InvalidArgumentError("not all arguments converted during string formatting");
  }
  return out;
}

absl::StatusOr<std::string> BraceFormat(std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false;
  bool used_manual = false;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      return absl::InvalidArgumentError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string_view::npos) return absl::InvalidArgumentError("expected '}' before end of string");
    std::string_view field = format.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (field.size() != bang + 2 || (field[bang + 1] != 's' && field[bang + 1] != 'r')) {
        return absl::InvalidArgumentError("only the !s and !r conversions of str.format are supported");
      }
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    if (field.find_first_of(":.[{") != std::string_view::npos) {
      return absl::InvalidArgumentError("str.format fields with a format spec, attribute or index are not supported");
    }
    const Value* arg = nullptr;
    if (field.empty()) {
      if (used_manual) {
        return absl::InvalidArgumentError("cannot switch from manual field specification to automatic field numbering");
      }
      used_auto = true;
      if (auto_index >= args.positional.size()) {
        return absl::InvalidArgumentError(absl::StrCat("Replacement index ", auto_index, " out of range"));
      }
      arg = &args.positional[auto_index++];
    } else if (field[0] >= '0' && field[0] <= '9') {
      if (used_auto) {
        return absl::InvalidArgumentError("cannot switch from automatic field numbering to manual field specification");
      }
      used_manual = true;
      auto index = ParsePythonInt(field);
      if (!index.ok() || *index < 0 || static_cast<size_t>(*index) >= args.positional.size()) {
        return absl::InvalidArgumentError(absl::StrCat("Replacement index ", std::string(field), " out of range"));
      }
      arg = &args.positional[static_cast<size_t>(*index)];
    } else {
      for (const auto& [name, value] : args.keywords) {
        if (name == field) arg = &value;
      }
      if (arg == nullptr) return absl::InvalidArgumentError(absl::StrCat("KeyError: ", PythonStringRepr(field)));
    }
    auto text = conversion == 's' ? ToPythonStr(*arg) : ToPythonRepr(*arg);
    if (!text.ok()) return text.status();
    out += *text;
  }
  return out;
}

}  // namespace crossreg::jinja

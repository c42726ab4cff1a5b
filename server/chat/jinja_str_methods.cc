#include "server/chat/jinja_str_methods.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

absl::Status NeedsString(std::string_view function, const Value& value) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(function), "() argument must be str, not ", value.TypeName()));
}

std::unordered_set<char32_t> CharSet(std::string_view chars) {
  std::unordered_set<char32_t> set;
  for (size_t at = 0; at < chars.size();) set.insert(NextCodePoint(chars, &at));
  return set;
}

absl::StatusOr<Value> Strip(std::string_view name, const std::string& self, const CallArgs& args, bool left,
                            bool right) {
  auto bound = BindArgs(name, args, {{"chars", Value::None()}});
  if (!bound.ok()) return bound.status();
  const Value& chars = (*bound)[0];
  if (!chars.is_none() && !chars.is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), " arg must be None or str"));
  }
  const std::vector<char32_t> cps = ToCodePoints(self);
  const std::unordered_set<char32_t> set = chars.is_none() ? std::unordered_set<char32_t>() : CharSet(chars.AsString());
  const auto strips = [&](char32_t cp) { return chars.is_none() ? IsPythonSpace(cp) : set.count(cp) > 0; };
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && strips(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strips(cps[end - 1])) --end;
  }
  return Value::String(FromCodePoints(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(begin),
                                                            cps.begin() + static_cast<std::ptrdiff_t>(end))));
}

absl::StatusOr<Value> Split(std::string_view name, const std::string& self, const CallArgs& args, bool from_right) {
  auto bound = BindArgs(name, args, {{"sep", Value::None()}, {"maxsplit", Value::Int(-1)}});
  if (!bound.ok()) return bound.status();
  const Value& sep = (*bound)[0];
  if (!(*bound)[1].is_integral()) return absl::InvalidArgumentError("maxsplit must be an integer");
  int64_t maxsplit = (*bound)[1].AsInt();
  if (maxsplit < 0) maxsplit = INT64_MAX;
  std::vector<std::string> parts;
  if (sep.is_none()) {
    const std::vector<char32_t> cps = ToCodePoints(self);
    if (!from_right) {
      size_t i = 0;
      while (true) {
        while (i < cps.size() && IsPythonSpace(cps[i])) ++i;
        if (i == cps.size()) break;
        if (static_cast<int64_t>(parts.size()) == maxsplit) {
          parts.push_back(FromCodePoints({cps.begin() + static_cast<std::ptrdiff_t>(i), cps.end()}));
          break;
        }
        size_t j = i;
        while (j < cps.size() && !IsPythonSpace(cps[j])) ++j;
        parts.push_back(FromCodePoints({cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j)}));
        i = j;
      }
    } else {
      size_t i = cps.size();
      while (true) {
        while (i > 0 && IsPythonSpace(cps[i - 1])) --i;
        if (i == 0) break;
        if (static_cast<int64_t>(parts.size()) == maxsplit) {
          parts.push_back(FromCodePoints({cps.begin(), cps.begin() + static_cast<std::ptrdiff_t>(i)}));
          break;
        }
        size_t j = i;
        while (j > 0 && !IsPythonSpace(cps[j - 1])) --j;
        parts.push_back(FromCodePoints({cps.begin() + static_cast<std::ptrdiff_t>(j), cps.begin() + static_cast<std::ptrdiff_t>(i)}));
        i = j;
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    if (!sep.is_string()) return NeedsString(name, sep);
    const std::string& s = sep.AsString();
    if (s.empty()) return absl::InvalidArgumentError("empty separator");
    if (!from_right) {
      size_t start = 0;
      for (int64_t n = 0; n < maxsplit; ++n) {
        const size_t found = self.find(s, start);
        if (found == std::string::npos) break;
        parts.push_back(self.substr(start, found - start));
        start = found + s.size();
      }
      parts.push_back(self.substr(start));
    } else {
      size_t end = self.size();
      for (int64_t n = 0; n < maxsplit && end >= s.size(); ++n) {
        const size_t found = self.rfind(s, end - s.size());
        if (found == std::string::npos) break;
        parts.push_back(self.substr(found + s.size(), end - found - s.size()));
        end = found;
      }
      parts.push_back(self.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& part : parts) items.push_back(Value::String(std::move(part)));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> AffixTest(std::string_view name, const std::string& self, const CallArgs& args, bool prefix) {
  auto bound = BindArgs(name, args, {{"prefix", std::nullopt}, {"start", Value::None()}, {"end", Value::None()}});
  if (!bound.ok()) return bound.status();
  const std::vector<char32_t> cps = ToCodePoints(self);
  size_t start;
  size_t end;
  ClampRange(*bound, 1, cps.size(), &start, &end);
  if ((*bound)[1].is_integral() && (*bound)[1].AsInt() > static_cast<int64_t>(cps.size())) return Value::Bool(false);
  const std::string window =
      start >= end ? std::string() : FromCodePoints({cps.begin() + static_cast<std::ptrdiff_t>(start), cps.begin() + static_cast<std::ptrdiff_t>(end)});
  std::vector<Value> candidates;
  const Value& affix = (*bound)[0];
  if (affix.is_string()) {
    candidates.push_back(affix);
  } else if (affix.is_list(SequenceKind::kTuple)) {
    candidates = affix.AsList().items;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), " first arg must be str or a tuple of str, not ", affix.TypeName()));
  }
  for (const Value& candidate : candidates) {
    if (!candidate.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("tuple for ", std::string(name), " must only contain str, not ", candidate.TypeName()));
    }
    const std::string& c = candidate.AsString();
    if (c.size() <= window.size() &&
        (prefix ? window.compare(0, c.size(), c) == 0 : window.compare(window.size() - c.size(), c.size(), c) == 0)) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

// find, rfind, index, rindex and count: code point positions.
absl::StatusOr<Value> Search(std::string_view name, const std::string& self, const CallArgs& args) {
  auto bound = BindArgs(name, args, {{"sub", std::nullopt}, {"start", Value::None()}, {"end", Value::None()}});
  if (!bound.ok()) return bound.status();
  if (!(*bound)[0].is_string()) return NeedsString(name, (*bound)[0]);
  const std::string& sub = (*bound)[0].AsString();
  const size_t length = CodePointCount(self);
  size_t start;
  size_t end;
  ClampRange(*bound, 1, length, &start, &end);
  const size_t byte_start = ByteOffsetOfCodePoint(self, start);
  const size_t byte_end = ByteOffsetOfCodePoint(self, end);
  const bool reverse = name[0] == 'r';
  if (name == "count") {
    if ((*bound)[1].is_integral() && (*bound)[1].AsInt() > static_cast<int64_t>(length)) return Value::Int(0);
    if (start > end) return Value::Int(0);
    if (sub.empty()) return Value::Int(static_cast<int64_t>(end - start + 1));
    int64_t count = 0;
    for (size_t at = self.find(sub, byte_start); at != std::string::npos && at + sub.size() <= byte_end;
         at = self.find(sub, at + sub.size())) {
      ++count;
    }
    return Value::Int(count);
  }
  size_t found = std::string::npos;
  if (start <= end && byte_end - byte_start >= sub.size()) {
    const std::string_view window = std::string_view(self).substr(byte_start, byte_end - byte_start);
    const size_t at = reverse ? window.rfind(sub) : window.find(sub);
    if (at != std::string_view::npos) found = byte_start + at;
  }
  if (found == std::string::npos) {
    if (name == "index" || name == "rindex") return absl::InvalidArgumentError("substring not found");
    return Value::Int(-1);
  }
  return Value::Int(static_cast<int64_t>(CodePointCount(std::string_view(self).substr(0, found))));
}

absl::StatusOr<Value> Replace(const std::string& self, const CallArgs& args, RenderBudget& budget) {
  auto bound = BindArgs("replace", args, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::Int(-1)}});
  if (!bound.ok()) return bound.status();
  if (!(*bound)[0].is_string()) return NeedsString("replace", (*bound)[0]);
  if (!(*bound)[1].is_string()) return NeedsString("replace", (*bound)[1]);
  if (!(*bound)[2].is_integral()) return absl::InvalidArgumentError("replace() count must be an integer");
  const std::string& from = (*bound)[0].AsString();
  const std::string& to = (*bound)[1].AsString();
  int64_t remaining = (*bound)[2].AsInt();
  if (remaining < 0) remaining = INT64_MAX;
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    size_t at = 0;
    while (true) {
      if (remaining-- > 0) out += to;
      if (at >= self.size()) break;
      const size_t start = at;
      NextCodePoint(self, &at);
      out.append(self, start, at - start);
      if (auto status = budget.CheckSize(out.size()); !status.ok()) return status;
    }
  } else {
    size_t start = 0;
    while (remaining-- > 0) {
      const size_t found = self.find(from, start);
      if (found == std::string::npos) break;
      out.append(self, start, found - start);
      out += to;
      start = found + from.size();
      if (auto status = budget.CheckSize(out.size()); !status.ok()) return status;
    }
    out.append(self, start);
  }
  if (auto status = budget.CheckSize(out.size()); !status.ok()) return status;
  if (auto status = budget.ChargeBytes(out.size()); !status.ok()) return status;
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Justify(std::string_view name, const std::string& self, const CallArgs& args,
                              RenderBudget& budget) {
  auto bound = BindArgs(name, args, {{"width", std::nullopt}, {"fillchar", Value::String(" ")}});
  if (!bound.ok()) return bound.status();
  if (!(*bound)[0].is_integral()) return absl::InvalidArgumentError(absl::StrCat(std::string(name), "() width must be an integer"));
  const Value& fill = (*bound)[1];
  if (!fill.is_string() || CodePointCount(fill.AsString()) != 1) {
    return absl::InvalidArgumentError("The fill character must be exactly one character long");
  }
  const int64_t width = (*bound)[0].AsInt();
  const auto length = static_cast<int64_t>(CodePointCount(self));
  if (width <= length) return Value::String(self);
  if (auto status = budget.CheckSize(static_cast<size_t>(width) * fill.AsString().size()); !status.ok()) return status;
  const int64_t pad = width - length;
  int64_t left = 0;
  if (name == "center") {
    left = pad / 2 + (pad & width & 1);  // CPython's rounding for odd padding
  } else if (name == "rjust") {
    left = pad;
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill.AsString();
  out += self;
  for (int64_t i = 0; i < pad - left; ++i) out += fill.AsString();
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Partition(std::string_view name, const std::string& self, const CallArgs& args) {
  auto bound = BindArgs(name, args, {{"sep", std::nullopt}});
  if (!bound.ok()) return bound.status();
  if (!(*bound)[0].is_string()) return NeedsString(name, (*bound)[0]);
  const std::string& sep = (*bound)[0].AsString();
  if (sep.empty()) return absl::InvalidArgumentError("empty separator");
  const bool reverse = name == "rpartition";
  const size_t found = reverse ? self.rfind(sep) : self.find(sep);
  if (found == std::string::npos) {
    return reverse ? Value::Tuple({Value::String(""), Value::String(""), Value::String(self)})
                   : Value::Tuple({Value::String(self), Value::String(""), Value::String("")});
  }
  return Value::Tuple({Value::String(self.substr(0, found)), Value::String(sep), Value::String(self.substr(found + sep.size()))});
}

absl::StatusOr<Value> Join(const std::string& self, const CallArgs& args, RenderBudget& budget) {
  auto bound = BindArgs("join", args, {{"iterable", std::nullopt}});
  if (!bound.ok()) return bound.status();
  auto items = Iterate((*bound)[0]);
  if (!items.ok()) return items.status();
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    const Value& item = (*items)[i];
    if (!item.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence item ", i, ": expected str instance, ", item.TypeName(), " found"));
    }
    if (i > 0) out += self;
    out += item.AsString();
    if (auto status = budget.CheckSize(out.size()); !status.ok()) return status;
  }
  if (auto status = budget.ChargeBytes(out.size()); !status.ok()) return status;
  return Value::String(std::move(out));
}

// isalpha() and friends, for ASCII text only: Python's answers for other characters need
// tables this interpreter does not carry.
absl::StatusOr<Value> AsciiClass(std::string_view name, const std::string& self, bool (*is)(unsigned char)) {
  bool all = !self.empty();
  for (char c : self) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) return absl::InvalidArgumentError(absl::StrCat("str.", std::string(name), "() of non-ASCII text is not supported"));
    all = all && is(u);
  }
  return Value::Bool(all);
}

absl::StatusOr<Value> SplitLines(const std::string& self, const CallArgs& args, RenderBudget&) {
  auto bound = BindArgs("splitlines", args, {{"keepends", Value::Bool(false)}});
  if (!bound.ok()) return bound.status();
  const bool keep = (*bound)[0].Truthy();
  std::vector<Value> lines;
  size_t start = 0;
  for (size_t at = 0; at < self.size();) {
    const size_t here = at;
    const char32_t cp = NextCodePoint(self, &at);
    if (!IsLineBreak(cp)) continue;
    if (cp == '\r' && at < self.size() && self[at] == '\n') ++at;
    lines.push_back(Value::String(self.substr(start, (keep ? at : here) - start)));
    start = at;
  }
  if (start < self.size()) lines.push_back(Value::String(self.substr(start)));
  return Value::List(std::move(lines));
}

absl::StatusOr<Value> FormatMethod(const std::string& self, const CallArgs& args, RenderBudget& budget) {
  auto text = BraceFormat(self, args);
  if (!text.ok()) return text.status();
  if (auto status = budget.CheckSize(text->size()); !status.ok()) return status;
  return Value::String(*std::move(text));
}

absl::StatusOr<Value> RemovePrefix(const std::string& self, const CallArgs& args, RenderBudget&) {
  auto bound = BindArgs("removeprefix", args, {{"prefix", std::nullopt}});
  if (!bound.ok()) return bound.status();
  if (!(*bound)[0].is_string()) return NeedsString("removeprefix", (*bound)[0]);
  const std::string& p = (*bound)[0].AsString();
  return Value::String(self.compare(0, p.size(), p) == 0 && self.size() >= p.size() ? self.substr(p.size()) : self);
}

absl::StatusOr<Value> RemoveSuffix(const std::string& self, const CallArgs& args, RenderBudget&) {
  auto bound = BindArgs("removesuffix", args, {{"suffix", std::nullopt}});
  if (!bound.ok()) return bound.status();
  if (!(*bound)[0].is_string()) return NeedsString("removesuffix", (*bound)[0]);
  const std::string& p = (*bound)[0].AsString();
  const bool has = !p.empty() && self.size() >= p.size() && self.compare(self.size() - p.size(), p.size(), p) == 0;
  return Value::String(has ? self.substr(0, self.size() - p.size()) : self);
}

// upper(), lower(), title(), capitalize(): no arguments, a new string.
absl::StatusOr<Value> CaseMapping(std::string_view name, const std::string& self, const CallArgs& args,
                                  std::string (*map)(std::string_view)) {
  if (auto status = CheckNoArguments(name, args); !status.ok()) return status;
  return Value::String(map(self));
}

// islower(), isupper(), isspace(), isascii(): no arguments, a bool.
absl::StatusOr<Value> TextPredicate(std::string_view name, const std::string& self, const CallArgs& args,
                                    bool (*holds)(std::string_view)) {
  if (auto status = CheckNoArguments(name, args); !status.ok()) return status;
  return Value::Bool(holds(self));
}

bool AllPythonSpace(std::string_view text) {
  bool all = !text.empty();
  for (size_t at = 0; at < text.size() && all;) all = IsPythonSpace(NextCodePoint(text, &at));
  return all;
}

bool AllAscii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool IsAsciiDigit(unsigned char c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool IsAsciiAlnum(unsigned char c) { return IsAsciiDigit(c) || IsAsciiLetter(c); }

const std::unordered_map<std::string_view, StrMethod>& StrMethods() {
  using Budget = RenderBudget;
  static const auto* methods = new std::unordered_map<std::string_view, StrMethod>{
      {"strip", [](const std::string& s, const CallArgs& a, Budget&) { return Strip("strip", s, a, true, true); }},
      {"lstrip", [](const std::string& s, const CallArgs& a, Budget&) { return Strip("lstrip", s, a, true, false); }},
      {"rstrip", [](const std::string& s, const CallArgs& a, Budget&) { return Strip("rstrip", s, a, false, true); }},
      {"split", [](const std::string& s, const CallArgs& a, Budget&) { return Split("split", s, a, false); }},
      {"rsplit", [](const std::string& s, const CallArgs& a, Budget&) { return Split("rsplit", s, a, true); }},
      {"splitlines", SplitLines},
      {"startswith",
       [](const std::string& s, const CallArgs& a, Budget&) { return AffixTest("startswith", s, a, true); }},
      {"endswith", [](const std::string& s, const CallArgs& a, Budget&) { return AffixTest("endswith", s, a, false); }},
      {"find", [](const std::string& s, const CallArgs& a, Budget&) { return Search("find", s, a); }},
      {"rfind", [](const std::string& s, const CallArgs& a, Budget&) { return Search("rfind", s, a); }},
      {"index", [](const std::string& s, const CallArgs& a, Budget&) { return Search("index", s, a); }},
      {"rindex", [](const std::string& s, const CallArgs& a, Budget&) { return Search("rindex", s, a); }},
      {"count", [](const std::string& s, const CallArgs& a, Budget&) { return Search("count", s, a); }},
      {"replace", [](const std::string& s, const CallArgs& a, Budget& b) { return Replace(s, a, b); }},
      {"join", [](const std::string& s, const CallArgs& a, Budget& b) { return Join(s, a, b); }},
      {"center", [](const std::string& s, const CallArgs& a, Budget& b) { return Justify("center", s, a, b); }},
      {"ljust", [](const std::string& s, const CallArgs& a, Budget& b) { return Justify("ljust", s, a, b); }},
      {"rjust", [](const std::string& s, const CallArgs& a, Budget& b) { return Justify("rjust", s, a, b); }},
      {"partition", [](const std::string& s, const CallArgs& a, Budget&) { return Partition("partition", s, a); }},
      {"rpartition", [](const std::string& s, const CallArgs& a, Budget&) { return Partition("rpartition", s, a); }},
      {"format", FormatMethod},
      {"removeprefix", RemovePrefix},
      {"removesuffix", RemoveSuffix},
      {"upper",
       [](const std::string& s, const CallArgs& a, Budget&) { return CaseMapping("upper", s, a, PythonUpper); }},
      {"lower",
       [](const std::string& s, const CallArgs& a, Budget&) { return CaseMapping("lower", s, a, PythonLower); }},
      {"title",
       [](const std::string& s, const CallArgs& a, Budget&) { return CaseMapping("title", s, a, PythonTitle); }},
      {"capitalize",
       [](const std::string& s, const CallArgs& a, Budget&) { return CaseMapping("capitalize", s, a, PythonCapitalize); }},
      {"islower",
       [](const std::string& s, const CallArgs& a, Budget&) { return TextPredicate("islower", s, a, PythonIsLower); }},
      {"isupper",
       [](const std::string& s, const CallArgs& a, Budget&) { return TextPredicate("isupper", s, a, PythonIsUpper); }},
      {"isspace",
       [](const std::string& s, const CallArgs& a, Budget&) { return TextPredicate("isspace", s, a, AllPythonSpace); }},
      {"isascii",
       [](const std::string& s, const CallArgs& a, Budget&) { return TextPredicate("isascii", s, a, AllAscii); }},
      {"isdigit",
       [](const std::string& s, const CallArgs&, Budget&) { return AsciiClass("isdigit", s, IsAsciiDigit); }},
      {"isdecimal",
       [](const std::string& s, const CallArgs&, Budget&) { return AsciiClass("isdecimal", s, IsAsciiDigit); }},
      {"isnumeric",
       [](const std::string& s, const CallArgs&, Budget&) { return AsciiClass("isnumeric", s, IsAsciiDigit); }},
      {"isalpha",
       [](const std::string& s, const CallArgs&, Budget&) { return AsciiClass("isalpha", s, IsAsciiLetter); }},
      {"isalnum",
       [](const std::string& s, const CallArgs&, Budget&) { return AsciiClass("isalnum", s, IsAsciiAlnum); }},
  };
  return *methods;
}

// Python 3.11's other str methods: found, not supported.
bool IsOtherStrMethod(std::string_view name) {
  static const auto* names = new std::unordered_set<std::string_view>{
      "casefold", "encode", "expandtabs", "format_map", "isidentifier", "isprintable", "istitle",
      "maketrans", "swapcase", "translate", "zfill"};
  return names->count(name) > 0;
}

}  // namespace

// Python's optional start/end arguments of find(), count(), startswith(): code point
// positions, negative from the end, clamped.
void ClampRange(const std::vector<Value>& bound, size_t first, size_t length, size_t* start, size_t* end) {
  const auto clamp = [&](const Value& v, size_t fallback) -> size_t {
    if (!v.is_integral()) return fallback;
    int64_t i = v.AsInt();
    if (i < 0) i += static_cast<int64_t>(length);
    return static_cast<size_t>(std::clamp<int64_t>(i, 0, static_cast<int64_t>(length)));
  };
  *start = clamp(bound[first], 0);
  *end = clamp(bound[first + 1], length);
}

absl::Status CheckNoArguments(std::string_view name, const CallArgs& args) {
  if (!args.positional.empty() || !args.keywords.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), "() takes no arguments"));
  }
  return absl::OkStatus();
}

StrMethod FindStrMethod(std::string_view name) {
  const auto it = StrMethods().find(name);
  return it == StrMethods().end() ? nullptr : it->second;
}

bool IsUnsupportedStrMethod(std::string_view name) { return IsOtherStrMethod(name); }

}  // namespace crossreg::jinja

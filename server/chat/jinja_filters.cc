#include "server/chat/jinja_filters.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_collection_filters.h"
#include "server/chat/jinja_json.h"
#include "server/chat/jinja_methods.h"
#include "server/chat/jinja_operators.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

using Values = std::vector<Value>;

absl::StatusOr<std::string> Text(const Value& v) { return ToPythonStr(v); }

// Binds `args` to the filter's parameters into `a`, or returns the binding error.
#define BIND(name, ...)                                               \
  auto bound_args = BindArgs(name, args, {__VA_ARGS__});              \
  if (!bound_args.ok()) return bound_args.status();                   \
  [[maybe_unused]] const Values& a = *bound_args

absl::StatusOr<Value> StringFilter(const Value& in, const CallArgs& args, std::string_view name,
                                   std::string (*transform)(std::string_view)) {
  BIND(name);
  auto text = Text(in);
  if (!text.ok()) return text.status();
  return Value::String(transform(*text));
}

std::string JinjaTitle(std::string_view text) {
  // jinja2's title: words split at runs of whitespace and -({[<, each word's first
  // character upper-cased and the rest lower-cased.
  const auto separator = [](char32_t cp) {
    return IsPythonSpace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
  };
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t start = at;
    size_t probe = at;
    const bool sep = separator(NextCodePoint(text, &probe));
    size_t end = probe;
    while (end < text.size()) {
      size_t next = end;
      if (separator(NextCodePoint(text, &next)) != sep) break;
      end = next;
    }
    if (sep) {
      out.append(text.substr(start, end - start));
    } else {
      out += PythonUpper(text.substr(start, probe - start));
      out += PythonLower(text.substr(probe, end - probe));
    }
    at = end;
  }
  return out;
}

absl::StatusOr<Value> ToJson(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("tojson", {"ensure_ascii", Value::Bool(false)}, {"indent", Value::None()}, {"separators", Value::None()},
       {"sort_keys", Value::Bool(false)});
  JsonDumpOptions options;
  options.ensure_ascii = a[0].Truthy();
  options.sort_keys = a[3].Truthy();
  if (a[1].is_string()) {
    options.indent = a[1].AsString();
  } else if (a[1].is_integral()) {
    options.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(a[1].AsInt(), 0, 1000)), ' ');
  } else if (!a[1].is_none()) {
    return absl::InvalidArgumentError(absl::StrCat("tojson indent must be an int or a str, not ", a[1].TypeName()));
  }
  if (!a[2].is_none()) {
    auto parts = Iterate(a[2]);
    if (!parts.ok() || parts->size() != 2 || !(*parts)[0].is_string() || !(*parts)[1].is_string()) {
      return absl::InvalidArgumentError("tojson separators must be two strings (item, key)");
    }
    options.item_separator = (*parts)[0].AsString();
    options.key_separator = (*parts)[1].AsString();
  }
  auto json = PythonJsonDumps(in, options);
  if (!json.ok()) return json.status();
  if (auto status = budget.CheckSize(json->size()); !status.ok()) return status;
  if (auto status = budget.ChargeBytes(json->size()); !status.ok()) return status;
  return Value::String(*std::move(json));
}

absl::StatusOr<Value> Indent(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("indent", {"width", Value::Int(4)}, {"first", Value::Bool(false)}, {"blank", Value::Bool(false)});
  if (in.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(in));
  std::string indentation;
  if (a[0].is_string()) {
    indentation = a[0].AsString();
  } else if (a[0].is_integral()) {
    indentation = std::string(static_cast<size_t>(std::clamp<int64_t>(a[0].AsInt(), 0, 1000)), ' ');
  } else {
    return absl::InvalidArgumentError("indent width must be an int or a str");
  }
  auto text = Text(in);
  if (!text.ok()) return text.status();
  CallArgs none;
  auto split = FindMethod(Value::String(*text + "\n"), "splitlines", &budget)->AsCallable().Call(none);
  if (!split.ok()) return split.status();
  const Values& lines = split->AsList().items;
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].AsString();
    if (i > 0) {
      out += "\n";
      if (a[2].Truthy() || !line.empty()) out += indentation;
    }
    out += line;
    if (auto status = budget.CheckSize(out.size()); !status.ok()) return status;
  }
  if (a[1].Truthy()) out = indentation + out;
  return Value::String(std::move(out));
}

absl::StatusOr<Value> IntFilter(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("int", {"default", Value::Int(0)}, {"base", Value::Int(10)});
  if (in.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(in));
  if (in.is_integral()) return Value::Int(in.AsInt());
  const auto from_float = [&](double d) -> absl::StatusOr<Value> {
    if (std::isnan(d)) return a[0];
    if (std::isinf(d)) return absl::InvalidArgumentError("cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18) return absl::InvalidArgumentError("the integer does not fit 64 bits");
    return Value::Int(static_cast<int64_t>(std::trunc(d)));
  };
  if (in.kind() == Value::Kind::kFloat) return from_float(in.AsDouble());
  if (!in.is_string()) return a[0];
  if (!a[1].is_integral()) return absl::InvalidArgumentError("int base must be an integer");
  auto n = ParsePythonInt(in.AsString(), static_cast<int>(std::clamp<int64_t>(a[1].AsInt(), -1, 37)));
  if (n.ok()) return Value::Int(*n);
  auto d = ParsePythonFloat(in.AsString());
  if (!d.ok()) return a[0];
  return from_float(*d);
}

absl::StatusOr<Value> FloatFilter(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("float", {"default", Value::Float(0.0)});
  if (in.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(in));
  if (in.is_number()) return Value::Float(in.AsDouble());
  if (!in.is_string()) return a[0];
  auto d = ParsePythonFloat(in.AsString());
  if (!d.ok()) return a[0];
  return Value::Float(*d);
}

absl::StatusOr<Value> Round(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("round", {"precision", Value::Int(0)}, {"method", Value::String("common")});
  const Value& precision = a[0];
  if (!a[1].is_string() || (a[1].AsString() != "common" && a[1].AsString() != "ceil" && a[1].AsString() != "floor")) {
    return absl::InvalidArgumentError("method must be common, ceil or floor");
  }
  if (in.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(in));
  if (!in.is_number()) return absl::InvalidArgumentError(absl::StrCat("type ", in.TypeName(), " doesn't define __round__ method"));
  if (!precision.is_integral()) return absl::InvalidArgumentError("round() precision must be an integer");
  const int64_t digits = std::clamp<int64_t>(precision.AsInt(), -400, 400);
  const std::string& method = a[1].AsString();
  if (method != "common") {
    const double scale = std::pow(10.0, static_cast<double>(digits));
    const double scaled = in.AsDouble() * scale;
    return Value::Float((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
  }
  if (in.is_integral()) {
    if (digits >= 0) return Value::Int(in.AsInt());
    if (digits < -18) return Value::Int(0);
    int64_t unit = 1;
    for (int64_t i = 0; i < -digits; ++i) unit *= 10;
    const int64_t x = in.AsInt();
    int64_t q = x / unit;
    int64_t r = x % unit;
    if (r < 0) {
      --q;
      r += unit;
    }
    if (2 * r > unit || (2 * r == unit && (q & 1))) ++q;  // half to even
    return Value::Int(q * unit);
  }
  const double x = in.AsDouble();
  if (!std::isfinite(x)) return Value::Float(x);
  if (digits >= 0) {
    // Python rounds the exact binary value to `digits` decimals, half to even, as
    // printf's correctly rounded conversion does.
    char buffer[512];
    std::snprintf(buffer, sizeof buffer, "%.*f", static_cast<int>(std::min<int64_t>(digits, 340)), x);
    return Value::Float(std::strtod(buffer, nullptr));
  }
  const double unit = std::pow(10.0, static_cast<double>(-digits));
  return Value::Float(std::nearbyint(x / unit) * unit);
}

absl::StatusOr<Value> Format(const Value& in, const CallArgs& args, RenderBudget& budget) {
  if (!args.positional.empty() && !args.keywords.empty()) {
    return absl::InvalidArgumentError("can't handle positional and keyword arguments at the same time");
  }
  auto text = Text(in);
  if (!text.ok()) return text.status();
  Value operand = Value::Tuple(args.positional);
  if (!args.keywords.empty()) {
    std::vector<std::pair<Value, Value>> entries;
    for (const auto& [key, value] : args.keywords) entries.emplace_back(Value::String(key), value);
    auto dict = Value::Dict(std::move(entries));
    if (!dict.ok()) return dict.status();
    operand = *std::move(dict);
  }
  return ApplyBinary(BinaryOperator::kMod, Value::String(*std::move(text)), operand, budget);
}

absl::StatusOr<Value> Escape(const Value& in) {
  if (in.IsMarkup()) return in;
  auto text = Text(in);
  if (!text.ok()) return text.status();
  std::string out;
  for (char c : *text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::Markup(std::move(out));
}

absl::StatusOr<Value> Default(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("default", {"default_value", Value::String("")}, {"boolean", Value::Bool(false)});
  if (in.is_undefined() || (a[1].Truthy() && !in.Truthy())) return a[0];
  return in;
}

absl::StatusOr<Value> Length(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("length");
  auto n = PythonLength(in);
  if (!n.ok()) return n.status();
  return Value::Int(*n);
}

absl::StatusOr<Value> Trim(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("trim", {"chars", Value::None()});
  auto text = Text(in);
  if (!text.ok()) return text.status();
  CallArgs strip_args;
  strip_args.positional.push_back(a[0]);
  return FindMethod(Value::String(*std::move(text)), "strip", &budget)->AsCallable().Call(std::move(strip_args));
}

absl::StatusOr<Value> StringConversion(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("string");
  if (in.IsMarkup()) return in;
  auto text = Text(in);
  if (!text.ok()) return text.status();
  return Value::String(*std::move(text));
}

absl::StatusOr<Value> Safe(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("safe");
  auto text = Text(in);
  if (!text.ok()) return text.status();
  return Value::Markup(*std::move(text));
}

// `name` is the spelling the template used ("escape" or its alias "e"), which the
// binding errors quote.
absl::StatusOr<Value> EscapeFilter(const Value& in, const CallArgs& args, std::string_view name) {
  BIND(name);
  return Escape(in);
}

absl::StatusOr<Value> Replace(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("replace", {"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::None()});
  auto text = Text(in);
  auto from = Text(a[0]);
  auto to = Text(a[1]);
  if (!text.ok() || !from.ok() || !to.ok()) return absl::InvalidArgumentError("replace: unprintable argument");
  CallArgs call;
  call.positional = {Value::String(*from), Value::String(*to), a[2].is_none() ? Value::Int(-1) : a[2]};
  return FindMethod(Value::String(*std::move(text)), "replace", &budget)->AsCallable().Call(std::move(call));
}

absl::StatusOr<Value> Center(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("center", {"width", Value::Int(80)});
  auto text = Text(in);
  if (!text.ok()) return text.status();
  CallArgs call;
  call.positional = {a[0]};
  return FindMethod(Value::String(*std::move(text)), "center", &budget)->AsCallable().Call(std::move(call));
}

absl::StatusOr<Value> ListFilter(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("list");
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  return Value::List(*std::move(items));
}

absl::StatusOr<Value> Items(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("items");
  if (in.is_undefined()) return Value::Iterator({}, "generator");
  if (in.kind() != Value::Kind::kDict) return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
  Values pairs;
  for (const auto& [key, value] : in.AsDict().entries) pairs.push_back(Value::Tuple({key, value}));
  return Value::Iterator(std::move(pairs), "generator");
}

absl::StatusOr<Value> Abs(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("abs");
  if (in.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(in.AsDouble()));
  if (in.is_integral()) {
    if (in.AsInt() == INT64_MIN) return absl::InvalidArgumentError("integer overflow: the result does not fit 64 bits");
    return Value::Int(in.AsInt() < 0 ? -in.AsInt() : in.AsInt());
  }
  if (in.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(in));
  return absl::InvalidArgumentError(absl::StrCat("bad operand type for abs(): '", in.TypeName(), "'"));
}

absl::StatusOr<Value> Attr(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("attr", {"name", std::nullopt});
  if (in.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(in));
  if (!a[0].is_string()) return Value();
  if (auto method = FindMethod(in, a[0].AsString(), &budget); method.has_value()) return *method;
  if (in.kind() == Value::Kind::kObject) return in.AsObject().GetAttr(a[0].AsString());
  return Value();
}

absl::StatusOr<Value> WordCount(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("wordcount");
  auto text = Text(in);
  if (!text.ok()) return text.status();
  int64_t words = 0;
  bool in_word = false;
  for (char c : *text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return absl::InvalidArgumentError("wordcount of non-ASCII text is not supported");
    }
    const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    words += word && !in_word;
    in_word = word;
  }
  return Value::Int(words);
}

const std::unordered_map<std::string_view, FilterFunction>& Filters() {
  static const auto* filters = new std::unordered_map<std::string_view, FilterFunction>{
      {"tojson", ToJson},
      {"indent", Indent},
      {"int", IntFilter},
      {"float", FloatFilter},
      {"round", Round},
      {"join", JoinFilter},
      {"map", MapFilter},
      {"sort", SortFilter},
      {"dictsort", DictSortFilter},
      {"unique", UniqueFilter},
      {"sum", SumFilter},
      {"reverse", ReverseFilter},
      {"batch", BatchFilter},
      {"format", Format},
      {"default", Default},
      {"d", Default},
      {"length", Length},
      {"count", Length},
      {"select", [](const Value& v, const CallArgs& a, RenderBudget& b) { return SelectFilter(v, a, b, true, false); }},
      {"reject", [](const Value& v, const CallArgs& a, RenderBudget& b) { return SelectFilter(v, a, b, false, false); }},
      {"selectattr", [](const Value& v, const CallArgs& a, RenderBudget& b) { return SelectFilter(v, a, b, true, true); }},
      {"rejectattr", [](const Value& v, const CallArgs& a, RenderBudget& b) { return SelectFilter(v, a, b, false, true); }},
      {"min", [](const Value& v, const CallArgs& a, RenderBudget& b) { return MinMaxFilter(v, a, b, false); }},
      {"max", [](const Value& v, const CallArgs& a, RenderBudget& b) { return MinMaxFilter(v, a, b, true); }},
      {"first", [](const Value& v, const CallArgs& a, RenderBudget&) { return FirstOrLastFilter(v, a, true); }},
      {"last", [](const Value& v, const CallArgs& a, RenderBudget&) { return FirstOrLastFilter(v, a, false); }},
      {"upper", [](const Value& v, const CallArgs& a, RenderBudget&) { return StringFilter(v, a, "upper", PythonUpper); }},
      {"lower", [](const Value& v, const CallArgs& a, RenderBudget&) { return StringFilter(v, a, "lower", PythonLower); }},
      {"capitalize",
       [](const Value& v, const CallArgs& a, RenderBudget&) { return StringFilter(v, a, "capitalize", PythonCapitalize); }},
      {"title", [](const Value& v, const CallArgs& a, RenderBudget&) { return StringFilter(v, a, "title", JinjaTitle); }},
      {"trim", Trim},
      {"string", StringConversion},
      {"safe", Safe},
      {"escape", [](const Value& v, const CallArgs& a, RenderBudget&) { return EscapeFilter(v, a, "escape"); }},
      {"e", [](const Value& v, const CallArgs& a, RenderBudget&) { return EscapeFilter(v, a, "e"); }},
      {"replace", Replace},
      {"center", Center},
      {"list", ListFilter},
      {"items", Items},
      {"abs", Abs},
      {"attr", Attr},
      {"wordcount", WordCount},
  };
  return *filters;
}

#undef BIND

}  // namespace

FilterFunction FindFilter(std::string_view name) {
  const auto it = Filters().find(name);
  return it == Filters().end() ? nullptr : it->second;
}

bool IsUnsupportedJinjaFilter(std::string_view name) {
  static const auto* names = new std::unordered_set<std::string_view>{
      "filesizeformat", "forceescape", "groupby", "pprint",  "random", "slice",   "striptags",
      "truncate",       "urlencode",   "urlize",  "wordwrap", "xmlattr"};
  return names->count(name) > 0;
}

}  // namespace crossreg::jinja

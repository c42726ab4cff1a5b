#include "server/chat/jinja_globals.h"

#include <chrono>
#include <ctime>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/chat/jinja_methods.h"
#include "server/chat/jinja_python_text.h"

namespace crossreg::jinja {
namespace {

// jinja2.sandbox.MAX_RANGE: the sandbox refuses longer ranges.
constexpr int64_t kMaxRange = 100000;

class Builtin : public Callable {
 public:
  using Function = std::function<absl::StatusOr<Value>(CallArgs)>;
  Builtin(std::string name, Function function) : name_(std::move(name)), function_(std::move(function)) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  absl::StatusOr<std::string> Repr() const override {
    return absl::InvalidArgumentError(absl::StrCat("printing the function ", name_, " is not supported"));
  }
  absl::StatusOr<Value> Call(CallArgs args) const override { return function_(std::move(args)); }

 private:
  std::string name_;
  Function function_;
};

// jinja2's joiner: "" the first time it is called, its separator after that.
class Joiner : public Callable {
 public:
  explicit Joiner(std::string separator) : separator_(std::move(separator)) {}
  std::string TypeName() const override { return "Joiner"; }
  absl::StatusOr<std::string> Repr() const override {
    return absl::InvalidArgumentError("printing a joiner is not supported");
  }
  absl::StatusOr<Value> Call(CallArgs args) const override {
    if (!args.positional.empty() || !args.keywords.empty()) {
      return absl::InvalidArgumentError("a joiner takes no arguments");
    }
    if (!used_) {
      used_ = true;
      return Value::String("");
    }
    return Value::String(separator_);
  }

 private:
  std::string separator_;
  mutable bool used_ = false;
};

// Python's dict(*args, **kwargs): a mapping or pairs, then keywords.
absl::StatusOr<std::vector<std::pair<Value, Value>>> DictEntries(const CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(function), " expected at most 1 argument, got ",
                                                   args.positional.size()));
  }
  std::vector<std::pair<Value, Value>> entries;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.kind() == Value::Kind::kDict) {
      entries = source.AsDict().entries;
    } else {
      auto pairs = Iterate(source);
      if (!pairs.ok()) return pairs.status();
      for (const Value& pair : *pairs) {
        auto items = Iterate(pair);
        if (!items.ok() || items->size() != 2) {
          return absl::InvalidArgumentError("dictionary update sequence element has the wrong length; 2 is required");
        }
        entries.emplace_back((*items)[0], (*items)[1]);
      }
    }
  }
  for (const auto& [key, value] : args.keywords) entries.emplace_back(Value::String(key), value);
  return entries;
}

absl::StatusOr<Value> Range(const CallArgs& args, RenderBudget& budget) {
  if (!args.keywords.empty()) return absl::InvalidArgumentError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat("range expected 1 to 3 arguments, got ", p.size()));
  }
  for (const Value& v : p) {
    if (!v.is_integral()) {
      if (v.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(v));
      return absl::InvalidArgumentError(
          absl::StrCat("'", v.TypeName(), "' object cannot be interpreted as an integer"));
    }
  }
  const int64_t start = p.size() == 1 ? 0 : p[0].AsInt();
  const int64_t stop = p.size() == 1 ? p[0].AsInt() : p[1].AsInt();
  const int64_t step = p.size() == 3 ? p[2].AsInt() : 1;
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 magnitude = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 length = span <= 0 ? 0 : (span + magnitude - 1) / magnitude;
  if (length > kMaxRange) {
    return absl::InvalidArgumentError(
        absl::StrCat("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange, ")."));
  }
  if (auto status = budget.Charge(static_cast<int64_t>(length)); !status.ok()) return status;
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(length));
  for (int64_t i = 0; i < static_cast<int64_t>(length); ++i) items.push_back(Value::Int(start + i * step));
  return Value::Range(start, stop, step, std::move(items));
}

// datetime.now().strftime(format): %f is the microseconds, %z and %Z are empty (a naive
// datetime has no zone), the rest is C's strftime in the "C" locale.
absl::StatusOr<Value> StrftimeNow(const CallArgs& args) {
  auto bound = BindArgs("strftime_now", args, {{"format", std::nullopt}});
  if (!bound.ok()) return bound.status();
  if (!(*bound)[0].is_string()) return absl::InvalidArgumentError("strftime() argument 1 must be str");
  const std::string& format = (*bound)[0].AsString();
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm local{};
  localtime_r(&seconds, &local);
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      out.push_back(format[i]);
      continue;
    }
    const char directive = format[++i];
    if (directive == 'f') {
      out += absl::StrFormat("%06d", micros);
    } else if (directive == 'z' || directive == 'Z') {
      // empty for a naive datetime
    } else {
      const char spec[3] = {'%', directive, '\0'};
      char buffer[256];
      const size_t n = std::strftime(buffer, sizeof buffer, spec, &local);
      out.append(buffer, n);
    }
  }
  return Value::String(std::move(out));
}

}  // namespace

Value Namespace::GetAttr(std::string_view name) const {
  for (const auto& [key, value] : attributes_) {
    if (key == name) return value;
  }
  UndefinedData data;
  data.name = std::string(name);
  data.owner = "Namespace";
  return Value::Undefined(std::move(data));
}

absl::StatusOr<std::string> Namespace::Repr(int depth) const {
  std::string out = "<Namespace {";
  for (size_t i = 0; i < attributes_.size(); ++i) {
    auto value = ToPythonRepr(attributes_[i].second, depth + 1);
    if (!value.ok()) return value.status();
    absl::StrAppend(&out, i > 0 ? ", " : "", PythonStringRepr(attributes_[i].first), ": ", *value);
  }
  return out + "}>";
}

void Namespace::Set(const std::string& name, Value value) {
  for (auto& [key, existing] : attributes_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  attributes_.emplace_back(name, std::move(value));
}

std::vector<std::pair<std::string, Value>> MakeGlobals(RenderBudget* budget, RenderArena* arena) {
  std::vector<std::pair<std::string, Value>> globals;
  const auto add = [&](std::string name, Builtin::Function function) {
    globals.emplace_back(name, Value::FromCallable(std::make_shared<Builtin>(name, std::move(function))));
  };
  add("range", [budget](CallArgs args) { return Range(args, *budget); });
  add("dict", [](CallArgs args) -> absl::StatusOr<Value> {
    auto entries = DictEntries(args, "dict");
    if (!entries.ok()) return entries.status();
    return Value::Dict(*std::move(entries));
  });
  add("namespace", [arena](CallArgs args) -> absl::StatusOr<Value> {
    auto entries = DictEntries(args, "namespace");
    if (!entries.ok()) return entries.status();
    auto ns = std::make_shared<Namespace>();
    for (auto& [key, value] : *entries) {
      if (!key.is_string()) return absl::InvalidArgumentError("namespace attribute names must be strings");
      ns->Set(key.AsString(), std::move(value));
    }
    arena->Keep(ns);
    return Value::FromObject(std::move(ns));
  });
  add("joiner", [](CallArgs args) -> absl::StatusOr<Value> {
    auto bound = BindArgs("joiner", args, {{"sep", Value::String(", ")}});
    if (!bound.ok()) return bound.status();
    auto separator = ToPythonStr((*bound)[0]);
    if (!separator.ok()) return separator.status();
    return Value::FromCallable(std::make_shared<Joiner>(*std::move(separator)));
  });
  add("raise_exception", [](CallArgs args) -> absl::StatusOr<Value> {
    auto bound = BindArgs("raise_exception", args, {{"message", std::nullopt}});
    if (!bound.ok()) return bound.status();
    auto message = ToPythonStr((*bound)[0]);
    if (!message.ok()) return message.status();
    return absl::InvalidArgumentError(*message);
  });
  add("strftime_now", [](CallArgs args) { return StrftimeNow(args); });
  globals.emplace_back("cycler", UnsupportedFeature("the global 'cycler'"));
  globals.emplace_back("lipsum", UnsupportedFeature("the global 'lipsum'"));
  return globals;
}

}  // namespace crossreg::jinja

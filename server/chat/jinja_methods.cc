#include "server/chat/jinja_methods.h"

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_str_methods.h"

namespace crossreg::jinja {
namespace {

class UnsupportedCallable : public Callable {
 public:
  explicit UnsupportedCallable(std::string what) : what_(std::move(what)) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  absl::StatusOr<std::string> Repr() const override { return Error(); }
  absl::StatusOr<Value> Call(CallArgs) const override { return Error(); }

 private:
  absl::Status Error() const { return absl::InvalidArgumentError(absl::StrCat(what_, " is not supported")); }
  std::string what_;
};

absl::StatusOr<Value> SequenceCount(const Value& self, const CallArgs& args) {
  auto bound = BindArgs("count", args, {{"value", std::nullopt}});
  if (!bound.ok()) return bound.status();
  int64_t n = 0;
  for (const Value& item : self.AsList().items) n += PythonEquals(item, (*bound)[0]);
  return Value::Int(n);
}

absl::StatusOr<Value> SequenceIndex(const Value& self, const CallArgs& args) {
  auto bound = BindArgs("index", args, {{"value", std::nullopt}, {"start", Value::None()}, {"stop", Value::None()}});
  if (!bound.ok()) return bound.status();
  const auto& items = self.AsList().items;
  size_t start;
  size_t end;
  ClampRange(*bound, 1, items.size(), &start, &end);
  for (size_t i = start; i < end; ++i) {
    if (PythonEquals(items[i], (*bound)[0])) return Value::Int(static_cast<int64_t>(i));
  }
  auto repr = ToPythonRepr((*bound)[0]);
  return absl::InvalidArgumentError(absl::StrCat(repr.ok() ? *repr : "value", " is not in ", self.TypeName()));
}

absl::StatusOr<Value> DictView(const Value& self, const CallArgs& args, SequenceKind kind) {
  const char* name = kind == SequenceKind::kDictItems ? "items" : kind == SequenceKind::kDictKeys ? "keys" : "values";
  if (auto status = CheckNoArguments(name, args); !status.ok()) return status;
  std::vector<Value> items;
  items.reserve(self.AsDict().entries.size());
  for (const auto& [key, value] : self.AsDict().entries) {
    if (kind == SequenceKind::kDictItems) {
      items.push_back(Value::Tuple({key, value}));
    } else {
      items.push_back(kind == SequenceKind::kDictKeys ? key : value);
    }
  }
  return Value::List(std::move(items), kind);
}

class BoundMethod : public Callable {
 public:
  BoundMethod(Value self, std::string name, RenderBudget* budget)
      : self_(std::move(self)), name_(std::move(name)), budget_(budget) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  absl::StatusOr<std::string> Repr() const override {
    return absl::InvalidArgumentError(absl::StrCat("printing the method ", self_.TypeName(), ".", name_,
                                                   " is not supported (Python prints its address)"));
  }
  absl::StatusOr<Value> Call(CallArgs args) const override {
    if (self_.is_string()) return FindStrMethod(name_)(self_.AsString(), args, *budget_);
    if (self_.kind() == Value::Kind::kDict) {
      if (name_ == "items") return DictView(self_, args, SequenceKind::kDictItems);
      if (name_ == "keys") return DictView(self_, args, SequenceKind::kDictKeys);
      if (name_ == "values") return DictView(self_, args, SequenceKind::kDictValues);
      if (name_ == "copy") {
        if (auto status = CheckNoArguments("copy", args); !status.ok()) return status;
        return Value::Dict(self_.AsDict().entries);
      }
      auto bound = BindArgs("get", args, {{"key", std::nullopt}, {"default", Value::None()}});
      if (!bound.ok()) return bound.status();
      if (auto hash = HashKey((*bound)[0]); !hash.ok()) return hash.status();
      const Value* found = self_.AsDict().Find((*bound)[0]);
      return found != nullptr ? *found : (*bound)[1];
    }
    if (name_ == "count") return SequenceCount(self_, args);
    if (name_ == "index") return SequenceIndex(self_, args);
    if (auto status = CheckNoArguments("copy", args); !status.ok()) return status;
    return Value::List(self_.AsList().items, self_.AsList().kind);
  }

 private:
  Value self_;
  std::string name_;
  RenderBudget* budget_;
};

Value Unsafe(const Value& self, std::string_view name) {
  UndefinedData data;
  data.name = std::string(name);
  data.owner = self.TypeName();
  data.hint = absl::StrCat("access to attribute '", std::string(name), "' of '", self.TypeName(), "' object is unsafe.");
  return Value::Undefined(std::move(data));
}

Value Bind(const Value& self, std::string_view name, RenderBudget* budget) {
  return Value::FromCallable(std::make_shared<BoundMethod>(self, std::string(name), budget));
}

Value Unsupported(const Value& self, std::string_view name) {
  return UnsupportedFeature(absl::StrCat("the ", self.TypeName(), " attribute '", std::string(name), "'"));
}

}  // namespace

Value UnsupportedFeature(std::string what) {
  return Value::FromCallable(std::make_shared<UnsupportedCallable>(std::move(what)));
}

std::optional<Value> FindMethod(const Value& self, std::string_view name, RenderBudget* budget) {
  switch (self.kind()) {
    case Value::Kind::kString:
      if (FindStrMethod(name) != nullptr) return Bind(self, name, budget);
      if (IsUnsupportedStrMethod(name)) return Unsupported(self, name);
      return std::nullopt;
    case Value::Kind::kDict:
      if (name == "get" || name == "items" || name == "keys" || name == "values" || name == "copy") {
        return Bind(self, name, budget);
      }
      if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" || name == "update") {
        return Unsafe(self, name);
      }
      if (name == "fromkeys") return Unsupported(self, name);
      return std::nullopt;
    case Value::Kind::kList: {
      const SequenceKind kind = self.AsList().kind;
      if (kind == SequenceKind::kList || kind == SequenceKind::kTuple || kind == SequenceKind::kRange) {
        if (name == "count" || name == "index") return Bind(self, name, budget);
      }
      if (kind == SequenceKind::kList) {
        if (name == "copy") return Bind(self, name, budget);
        if (name == "append" || name == "clear" || name == "extend" || name == "insert" || name == "pop" ||
            name == "remove" || name == "reverse" || name == "sort") {
          return Unsafe(self, name);
        }
      }
      if (kind == SequenceKind::kRange && (name == "start" || name == "stop" || name == "step")) {
        const ListData& range = self.AsList();
        return Value::Int(name == "start" ? range.range_start : name == "stop" ? range.range_stop : range.range_step);
      }
      if (kind == SequenceKind::kDictItems || kind == SequenceKind::kDictKeys) {
        if (name == "isdisjoint" || name == "mapping") return Unsupported(self, name);
      }
      return std::nullopt;
    }
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat: {
      static const auto* names = new std::unordered_set<std::string_view>{
          "as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator", "from_bytes", "imag",
          "numerator", "real", "to_bytes", "fromhex", "hex", "is_integer"};
      if (names->count(name) > 0) return Unsupported(self, name);
      return std::nullopt;
    }
    case Value::Kind::kIterator:
      if (name == "send" || name == "throw" || name == "close") return Unsupported(self, name);
      return std::nullopt;
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kObject:
    case Value::Kind::kCallable:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace crossreg::jinja

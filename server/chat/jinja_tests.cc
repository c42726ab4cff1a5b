#include "server/chat/jinja_tests.h"

#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_call.h"
#include "server/chat/jinja_filters.h"
#include "server/chat/jinja_operators.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

absl::StatusOr<Value> OneArgument(std::string_view test, const CallArgs& args) {
  auto bound = BindArgs(test, args, {{"other", std::nullopt}});
  if (!bound.ok()) return bound.status();
  return (*bound)[0];
}

absl::Status NoArguments(std::string_view test, const CallArgs& args) {
  if (!args.positional.empty() || !args.keywords.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the test '", std::string(test), "' takes no arguments"));
  }
  return absl::OkStatus();
}

// value % divisor == expected, with Python's %.
absl::StatusOr<bool> Remainder(const Value& value, const Value& divisor, int64_t expected) {
  RenderBudget unlimited(INT64_MAX, SIZE_MAX);
  auto mod = ApplyBinary(BinaryOperator::kMod, value, divisor, unlimited);
  if (!mod.ok()) return mod.status();
  return PythonEquals(*mod, Value::Int(expected));
}

absl::StatusOr<bool> Compare(CompareOperator op, const Value& value, const CallArgs& args) {
  auto other = OneArgument(OperatorSymbol(op), args);
  if (!other.ok()) return other.status();
  return ApplyCompare(op, value, *other);
}

bool Iterable(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kString:
    case Value::Kind::kList:
    case Value::Kind::kDict:
    case Value::Kind::kIterator:
      return true;
    case Value::Kind::kObject:
      return value.AsObject().TypeName() == "LoopContext";
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kCallable:
      return false;
  }
  return false;
}

#define CROSSREG_NULLARY_TEST(name, expr)                                     \
  {name, [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {   \
     if (auto status = NoArguments(name, args); !status.ok()) return status;  \
     return (expr);                                                           \
   }}

const std::unordered_map<std::string_view, TestFunction>& Tests() {
  static const auto* tests = new std::unordered_map<std::string_view, TestFunction>{
      CROSSREG_NULLARY_TEST("defined", !v.is_undefined()),
      CROSSREG_NULLARY_TEST("undefined", v.is_undefined()),
      CROSSREG_NULLARY_TEST("none", v.is_none()),
      CROSSREG_NULLARY_TEST("boolean", v.kind() == Value::Kind::kBool),
      CROSSREG_NULLARY_TEST("true", v.kind() == Value::Kind::kBool && v.AsBool()),
      CROSSREG_NULLARY_TEST("false", v.kind() == Value::Kind::kBool && !v.AsBool()),
      CROSSREG_NULLARY_TEST("integer", v.kind() == Value::Kind::kInt),
      CROSSREG_NULLARY_TEST("float", v.kind() == Value::Kind::kFloat),
      CROSSREG_NULLARY_TEST("number", v.is_number()),
      CROSSREG_NULLARY_TEST("string", v.is_string()),
      CROSSREG_NULLARY_TEST("mapping", v.kind() == Value::Kind::kDict),
      CROSSREG_NULLARY_TEST("iterable", Iterable(v)),
      // len(x) and x.__getitem__ exist: str, list, tuple, range, dict, and jinja2's Undefined.
      CROSSREG_NULLARY_TEST("sequence", v.is_undefined() || v.is_string() || v.kind() == Value::Kind::kDict ||
                                            v.is_list(SequenceKind::kList) || v.is_list(SequenceKind::kTuple) ||
                                            v.is_list(SequenceKind::kRange)),
      // jinja2's Undefined and loop objects define __call__.
      CROSSREG_NULLARY_TEST("callable", v.kind() == Value::Kind::kCallable || v.is_undefined() ||
                                            (v.kind() == Value::Kind::kObject && v.AsObject().TypeName() == "LoopContext")),
      CROSSREG_NULLARY_TEST("escaped", v.IsMarkup()),
      {"lower",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         if (auto status = NoArguments("lower", args); !status.ok()) return status;
         auto text = ToPythonStr(v);
         if (!text.ok()) return text.status();
         return PythonIsLower(*text);
       }},
      {"upper",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         if (auto status = NoArguments("upper", args); !status.ok()) return status;
         auto text = ToPythonStr(v);
         if (!text.ok()) return text.status();
         return PythonIsUpper(*text);
       }},
      {"odd",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         if (auto status = NoArguments("odd", args); !status.ok()) return status;
         return Remainder(v, Value::Int(2), 1);
       }},
      {"even",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         if (auto status = NoArguments("even", args); !status.ok()) return status;
         return Remainder(v, Value::Int(2), 0);
       }},
      {"divisibleby",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         auto num = OneArgument("divisibleby", args);
         if (!num.ok()) return num.status();
         return Remainder(v, *num, 0);
       }},
      {"in",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         auto seq = OneArgument("in", args);
         if (!seq.ok()) return seq.status();
         return Contains(*seq, v);
       }},
      {"sameas",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         auto other = OneArgument("sameas", args);
         if (!other.ok()) return other.status();
         // None, True and False are singletons; other values are compared by identity.
         if (v.is_none() || v.kind() == Value::Kind::kBool) return v.kind() == other->kind() && PythonEquals(v, *other);
         return v.SameObject(*other);
       }},
      {"filter",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         if (auto status = NoArguments("filter", args); !status.ok()) return status;
         return v.is_string() && FindFilter(v.AsString()) != nullptr;
       }},
      {"test",
       [](const Value& v, const CallArgs& args) -> absl::StatusOr<bool> {
         if (auto status = NoArguments("test", args); !status.ok()) return status;
         return v.is_string() && FindTest(v.AsString()) != nullptr;
       }},
      {"==", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kEq, v, a); }},
      {"eq", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kEq, v, a); }},
      {"equalto", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kEq, v, a); }},
      {"!=", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kNe, v, a); }},
      {"ne", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kNe, v, a); }},
      {"<", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kLt, v, a); }},
      {"lt", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kLt, v, a); }},
      {"lessthan", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kLt, v, a); }},
      {"<=", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kLe, v, a); }},
      {"le", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kLe, v, a); }},
      {">", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kGt, v, a); }},
      {"gt", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kGt, v, a); }},
      {"greaterthan", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kGt, v, a); }},
      {">=", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kGe, v, a); }},
      {"ge", [](const Value& v, const CallArgs& a) { return Compare(CompareOperator::kGe, v, a); }},
  };
  return *tests;
}

#undef CROSSREG_NULLARY_TEST

}  // namespace

TestFunction FindTest(std::string_view name) {
  const auto it = Tests().find(name);
  return it == Tests().end() ? nullptr : it->second;
}

}  // namespace crossreg::jinja

#include "server/chat/jinja_operators.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_python_text.h"

namespace crossreg::jinja {
namespace {

absl::Status TypeMismatch(BinaryOperator op, const Value& a, const Value& b) {
  if (op == BinaryOperator::kAdd && (a.is_string() || a.kind() == Value::Kind::kList) && b.kind() != a.kind()) {
    return absl::InvalidArgumentError(
        absl::StrCat("can only concatenate ", a.TypeName(), " (not \"", b.TypeName(), "\") to ", a.TypeName()));
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported operand type(s) for ", std::string(OperatorSymbol(op)), ": '",
                                                 a.TypeName(), "' and '", b.TypeName(), "'"));
}

absl::Status Overflow() { return absl::InvalidArgumentError("integer overflow: the result does not fit 64 bits"); }

// markupsafe.escape: what Markup + str does to the plain operand.
std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<Value> Repeat(const Value& sequence, int64_t count, RenderBudget& budget) {
  if (count <= 0) return sequence.is_string() ? Value::String("") : Value::List({}, sequence.AsList().kind);
  if (sequence.is_string()) {
    const std::string& text = sequence.AsString();
    const double bytes = static_cast<double>(text.size()) * static_cast<double>(count);
    if (auto status = budget.CheckSize(bytes > 1e18 ? SIZE_MAX : static_cast<size_t>(bytes)); !status.ok()) return status;
    if (auto status = budget.ChargeBytes(static_cast<size_t>(bytes)); !status.ok()) return status;
    std::string out;
    out.reserve(static_cast<size_t>(bytes));
    for (int64_t i = 0; i < count; ++i) out += text;
    return Value::String(std::move(out));
  }
  const auto& items = sequence.AsList().items;
  const double n = static_cast<double>(items.size()) * static_cast<double>(count);
  if (auto status = budget.CheckSize(n > 1e17 ? SIZE_MAX : static_cast<size_t>(n) * 16); !status.ok()) return status;
  if (auto status = budget.Charge(static_cast<int64_t>(n)); !status.ok()) return status;
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out), sequence.AsList().kind);
}

bool IsRepeatable(const Value& v) {
  return v.is_string() || v.is_list(SequenceKind::kList) || v.is_list(SequenceKind::kTuple);
}

absl::StatusOr<Value> IntPower(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value::Int(result);
}

absl::StatusOr<Value> FloatResult(double d) {
  if (std::isinf(d)) return absl::InvalidArgumentError("OverflowError: the result is out of range");
  return Value::Float(d);
}

absl::StatusOr<Value> Arithmetic(BinaryOperator op, const Value& a, const Value& b) {
  const bool floats = a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
  if (!floats) {
    const int64_t x = a.AsInt();
    const int64_t y = b.AsInt();
    int64_t r = 0;
    switch (op) {
      case BinaryOperator::kAdd:
        if (__builtin_add_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOperator::kSub:
        if (__builtin_sub_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOperator::kMul:
        if (__builtin_mul_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOperator::kDiv:
        if (y == 0) return absl::InvalidArgumentError("division by zero");
        return Value::Float(static_cast<double>(x) / static_cast<double>(y));
      case BinaryOperator::kFloorDiv:
      case BinaryOperator::kMod: {
        if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return op == BinaryOperator::kMod ? Value::Int(0) : absl::StatusOr<Value>(Overflow());
        int64_t q = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::Int(op == BinaryOperator::kFloorDiv ? q : m);
      }
      case BinaryOperator::kPow:
        if (y >= 0) return IntPower(x, y);
        if (x == 0) return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
        return FloatResult(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
  }
  const double x = a.AsDouble();
  const double y = b.AsDouble();
  switch (op) {
    case BinaryOperator::kAdd:
      return Value::Float(x + y);
    case BinaryOperator::kSub:
      return Value::Float(x - y);
    case BinaryOperator::kMul:
      return Value::Float(x * y);
    case BinaryOperator::kDiv:
      if (y == 0) return absl::InvalidArgumentError("float division by zero");
      return Value::Float(x / y);
    case BinaryOperator::kFloorDiv:
    case BinaryOperator::kMod: {
      if (y == 0) return absl::InvalidArgumentError("float floor division by zero");
      // CPython's float_divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return Value::Float(op == BinaryOperator::kFloorDiv ? floordiv : mod);
    }
    case BinaryOperator::kPow:
      if (x == 0 && y < 0) return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y) && std::isfinite(y)) {
        return absl::InvalidArgumentError("a negative number to a fractional power is complex, which is not supported");
      }
      return FloatResult(std::pow(x, y));
  }
  return absl::InternalError("unknown operator");
}

}  // namespace

std::string_view OperatorSymbol(BinaryOperator op) {
  switch (op) {
    case BinaryOperator::kAdd:
      return "+";
    case BinaryOperator::kSub:
      return "-";
    case BinaryOperator::kMul:
      return "*";
    case BinaryOperator::kDiv:
      return "/";
    case BinaryOperator::kFloorDiv:
      return "//";
    case BinaryOperator::kMod:
      return "%";
    case BinaryOperator::kPow:
      return "**";
  }
  return "?";
}

std::string_view OperatorSymbol(CompareOperator op) {
  switch (op) {
    case CompareOperator::kEq:
      return "==";
    case CompareOperator::kNe:
      return "!=";
    case CompareOperator::kLt:
      return "<";
    case CompareOperator::kLe:
      return "<=";
    case CompareOperator::kGt:
      return ">";
    case CompareOperator::kGe:
      return ">=";
    case CompareOperator::kIn:
      return "in";
    case CompareOperator::kNotIn:
      return "not in";
  }
  return "?";
}

absl::StatusOr<Value> ApplyBinary(BinaryOperator op, const Value& a, const Value& b, RenderBudget& budget) {
  if (a.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(a));
  if (b.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(b));
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  switch (op) {
    case BinaryOperator::kAdd:
      if (a.is_string() && b.is_string()) {
        const size_t size = a.AsString().size() + b.AsString().size();
        if (auto status = budget.CheckSize(size); !status.ok()) return status;
        if (auto status = budget.ChargeBytes(size); !status.ok()) return status;
        // Markup + str escapes the plain side (markupsafe), whichever side it is on.
        if (a.IsMarkup() || b.IsMarkup()) {
          return Value::Markup((a.IsMarkup() ? a.AsString() : HtmlEscape(a.AsString())) +
                               (b.IsMarkup() ? b.AsString() : HtmlEscape(b.AsString())));
        }
        return Value::String(a.AsString() + b.AsString());
      }
      if (a.kind() == Value::Kind::kList && b.kind() == Value::Kind::kList && a.AsList().kind == b.AsList().kind &&
          (a.is_list(SequenceKind::kList) || a.is_list(SequenceKind::kTuple))) {
        std::vector<Value> items = a.AsList().items;
        items.insert(items.end(), b.AsList().items.begin(), b.AsList().items.end());
        if (auto status = budget.Charge(static_cast<int64_t>(items.size())); !status.ok()) return status;
        return Value::List(std::move(items), a.AsList().kind);
      }
      break;
    case BinaryOperator::kMul:
      if (IsRepeatable(a) && b.is_integral()) return Repeat(a, b.AsInt(), budget);
      if (a.is_integral() && IsRepeatable(b)) return Repeat(b, a.AsInt(), budget);
      break;
    case BinaryOperator::kMod:
      if (a.is_string()) {
        auto formatted = PercentFormat(a.AsString(), b);
        if (!formatted.ok()) return formatted.status();
        if (auto status = budget.CheckSize(formatted->size()); !status.ok()) return status;
        return Value::String(*std::move(formatted));
      }
      break;
    case BinaryOperator::kSub:
    case BinaryOperator::kDiv:
    case BinaryOperator::kFloorDiv:
    case BinaryOperator::kPow:
      break;
  }
  return TypeMismatch(op, a, b);
}

absl::StatusOr<Value> ApplyUnary(bool negate, const Value& operand) {
  if (operand.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(operand));
  if (operand.kind() == Value::Kind::kFloat) return Value::Float(negate ? -operand.AsDouble() : operand.AsDouble());
  if (operand.is_integral()) {
    if (!negate) return Value::Int(operand.AsInt());
    if (operand.AsInt() == INT64_MIN) return Overflow();
    return Value::Int(-operand.AsInt());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad operand type for unary ", negate ? "-" : "+", ": '", operand.TypeName(), "'"));
}

absl::StatusOr<bool> ApplyCompare(CompareOperator op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOperator::kEq:
      return PythonEquals(a, b);
    case CompareOperator::kNe:
      return !PythonEquals(a, b);
    case CompareOperator::kIn:
      return Contains(b, a);
    case CompareOperator::kNotIn: {
      auto in = Contains(b, a);
      if (!in.ok()) return in.status();
      return !*in;
    }
    case CompareOperator::kLt:
    case CompareOperator::kLe:
    case CompareOperator::kGt:
    case CompareOperator::kGe:
      break;
  }
  auto order = PythonCompare(a, b);
  if (!order.ok()) {
    if (a.is_undefined() || b.is_undefined()) return order.status();
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(OperatorSymbol(op)), "' not supported between instances of '",
                                                   a.TypeName(), "' and '", b.TypeName(), "'"));
  }
  if (*order == 2) return false;  // NaN orders with nothing
  switch (op) {
    case CompareOperator::kLt:
      return *order < 0;
    case CompareOperator::kLe:
      return *order <= 0;
    case CompareOperator::kGt:
      return *order > 0;
    default:
      return *order >= 0;
  }
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'in <string>' requires string as left operand, not ", item.TypeName()));
      }
      return container.AsString().find(item.AsString()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& element : container.AsList().items) {
        if (PythonEquals(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict: {
      auto hash = HashKey(item);
      if (!hash.ok()) return hash.status();
      return container.AsDict().Find(item) != nullptr;
    }
    case Value::Kind::kIterator: {
      IteratorData& it = container.AsIterator();
      while (it.next < it.items.size()) {
        if (PythonEquals(it.items[it.next++], item)) return true;
      }
      return false;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("argument of type '", container.TypeName(), "' is not iterable"));
  }
}

}  // namespace crossreg::jinja

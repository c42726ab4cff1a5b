// The operators of template expressions, with Python's semantics: int and float
// arithmetic (floor division and modulo round toward negative infinity), str and list
// concatenation and repetition, "%" formatting, comparisons and `in`. 64-bit ints: a
// result Python would carry into a big integer is an error here.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "server/chat/jinja_call.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

enum class BinaryOperator { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOperator { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

std::string_view OperatorSymbol(BinaryOperator op);
std::string_view OperatorSymbol(CompareOperator op);

absl::StatusOr<Value> ApplyBinary(BinaryOperator op, const Value& a, const Value& b, RenderBudget& budget);
// -x and +x
absl::StatusOr<Value> ApplyUnary(bool negate, const Value& operand);
absl::StatusOr<bool> ApplyCompare(CompareOperator op, const Value& a, const Value& b);
// `item in container`
absl::StatusOr<bool> Contains(const Value& container, const Value& item);

}  // namespace crossreg::jinja

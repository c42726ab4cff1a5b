#include "server/chat/jinja_access.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "server/chat/jinja_methods.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

Value Missing(const Value& object, std::string name, bool element) {
  UndefinedData data;
  data.name = std::move(name);
  data.owner = object.TypeName();
  data.element = element;
  return Value::Undefined(std::move(data));
}

Value MissingItem(const Value& object, const Value& key) {
  if (key.is_string()) return Missing(object, key.AsString(), false);
  auto repr = ToPythonRepr(key);
  return Missing(object, repr.ok() ? *repr : key.TypeName(), true);
}

// Python's dunder attributes exist on every object and the sandbox refuses them all.
bool IsDunder(std::string_view name) {
  return name.size() > 4 && name.starts_with("__") && name.ends_with("__");
}

Value UnsafeAttribute(const Value& object, std::string_view name) {
  UndefinedData data;
  data.name = std::string(name);
  data.owner = object.TypeName();
  data.hint = "access to attribute '" + std::string(name) + "' of '" + object.TypeName() + "' object is unsafe.";
  return Value::Undefined(std::move(data));
}

// The item at a Python index (negative from the end), or nothing.
std::optional<size_t> Position(int64_t index, size_t length) {
  if (index < 0) index += static_cast<int64_t>(length);
  if (index < 0 || index >= static_cast<int64_t>(length)) return std::nullopt;
  return static_cast<size_t>(index);
}

// CPython's PySlice_AdjustIndices: the first index, the stop sentinel, for a length.
void AdjustSlice(int64_t length, const Value& start, const Value& stop, int64_t step, int64_t* first, int64_t* last) {
  const auto adjust = [&](const Value& v, bool is_start) -> int64_t {
    if (v.is_none()) {
      if (step < 0) return is_start ? length - 1 : -1;
      return is_start ? 0 : length;
    }
    int64_t i = v.AsInt();
    if (i < 0) {
      i += length;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    return i;
  };
  *first = adjust(start, true);
  *last = adjust(stop, false);
}

}  // namespace

absl::StatusOr<Value> GetAttribute(const Value& object, std::string_view name, RenderBudget* budget) {
  if (object.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(object));
  if (IsDunder(name)) return UnsafeAttribute(object, name);
  if (auto method = FindMethod(object, name, budget); method.has_value()) return *method;
  switch (object.kind()) {
    case Value::Kind::kDict: {
      const Value* found = object.AsDict().FindString(name);
      if (found != nullptr) return *found;
      break;
    }
    case Value::Kind::kObject:
      return object.AsObject().GetAttr(name);
    default:
      break;
  }
  return Missing(object, std::string(name), false);
}

absl::StatusOr<Value> GetItem(const Value& object, const Value& key, RenderBudget* budget) {
  if (object.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(object));
  switch (object.kind()) {
    case Value::Kind::kString:
      if (key.is_integral()) {
        const std::string& text = object.AsString();
        const auto at = Position(key.AsInt(), CodePointCount(text));
        if (!at.has_value()) return MissingItem(object, key);
        const size_t begin = ByteOffsetOfCodePoint(text, *at);
        size_t end = begin;
        NextCodePoint(text, &end);
        return Value::String(text.substr(begin, end - begin));
      }
      break;
    case Value::Kind::kList: {
      const ListData& list = object.AsList();
      const bool indexable = list.kind == SequenceKind::kList || list.kind == SequenceKind::kTuple ||
                             list.kind == SequenceKind::kRange;
      if (indexable && key.is_integral()) {
        const auto at = Position(key.AsInt(), list.items.size());
        if (!at.has_value()) return MissingItem(object, key);
        return list.items[*at];
      }
      break;
    }
    case Value::Kind::kDict:
      if (const Value* found = object.AsDict().Find(key); found != nullptr) return *found;
      break;
    default:
      break;
  }
  // Python's obj[key] failed: a string key is tried as an attribute.
  if (key.is_string()) {
    if (IsDunder(key.AsString())) return UnsafeAttribute(object, key.AsString());
    if (auto method = FindMethod(object, key.AsString(), budget); method.has_value()) return *method;
    if (object.kind() == Value::Kind::kObject) return object.AsObject().GetAttr(key.AsString());
  }
  return MissingItem(object, key);
}

absl::StatusOr<Value> GetSlice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(object));
  // jinja2 compiles a slice to a plain Python subscript, past the sandbox's getitem:
  // what Python refuses is an error here, not undefined.
  const bool sliceable = object.is_string() || object.is_list(SequenceKind::kList) ||
                         object.is_list(SequenceKind::kTuple) || object.is_list(SequenceKind::kRange);
  if (!sliceable) {
    if (object.kind() == Value::Kind::kDict) return absl::InvalidArgumentError("unhashable type: 'slice'");
    return absl::InvalidArgumentError(absl::StrCat("'", object.TypeName(), "' object is not subscriptable"));
  }
  for (const Value* bound : {&start, &stop, &step}) {
    if (bound->is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(*bound));
    if (!bound->is_none() && !bound->is_integral()) {
      return absl::InvalidArgumentError("slice indices must be integers or None or have an __index__ method");
    }
  }
  const int64_t stride = step.is_none() ? 1 : step.AsInt();
  if (stride == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  const auto take = [&](int64_t length, auto&& emit) {
    int64_t first;
    int64_t last;
    AdjustSlice(length, start, stop, stride, &first, &last);
    for (int64_t i = first; stride > 0 ? i < last : i > last; i += stride) emit(static_cast<size_t>(i));
    return std::pair<int64_t, int64_t>(first, last);
  };
  if (object.is_string()) {
    const std::vector<char32_t> cps = ToCodePoints(object.AsString());
    std::vector<char32_t> out;
    take(static_cast<int64_t>(cps.size()), [&](size_t i) { out.push_back(cps[i]); });
    return Value::String(FromCodePoints(out));
  }
  if (object.kind() == Value::Kind::kList) {
    const ListData& list = object.AsList();
    if (list.kind == SequenceKind::kList || list.kind == SequenceKind::kTuple || list.kind == SequenceKind::kRange) {
      std::vector<Value> out;
      const auto [first, last] = take(static_cast<int64_t>(list.items.size()), [&](size_t i) { out.push_back(list.items[i]); });
      if (list.kind == SequenceKind::kRange) {
        return Value::Range(list.range_start + first * list.range_step, list.range_start + last * list.range_step,
                            list.range_step * stride, std::move(out));
      }
      return Value::List(std::move(out), list.kind);
    }
  }
  return absl::InternalError("unreachable: the object was checked to be sliceable");
}

}  // namespace crossreg::jinja

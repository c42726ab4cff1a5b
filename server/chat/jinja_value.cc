#include "server/chat/jinja_value.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

// Destroying a value nested a million levels deep must not recurse a million frames:
// containers hand the values they hold to this queue, which the outermost destructor
// drains one value at a time.
thread_local std::vector<Value>* release_queue = nullptr;

void ReleaseValues(std::vector<Value>* values) {
  if (release_queue != nullptr) {
    for (Value& value : *values) {
      if (value.HoldsValues()) release_queue->push_back(std::move(value));
    }
    return;
  }
  std::vector<Value> queue;
  release_queue = &queue;
  for (Value& value : *values) {
    if (value.HoldsValues()) queue.push_back(std::move(value));
  }
  while (!queue.empty()) {
    Value last = std::move(queue.back());
    queue.pop_back();
  }  // `last` is destroyed here, queueing what it held
  release_queue = nullptr;
}

// -1, 0, 1, or 2 when unordered (NaN); exact for int against float as Python is.
int CompareNumbers(const Value& a, const Value& b) {
  if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) {
    const int64_t x = a.AsInt();
    const int64_t y = b.AsInt();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const double x = a.AsDouble();
  const double y = b.AsDouble();
  if (std::isnan(x) || std::isnan(y)) return 2;
  if (x < y) return -1;
  if (x > y) return 1;
  // Equal as doubles; an int beyond 2^53 may still differ from the float.
  if (a.kind() != Value::Kind::kFloat && std::fabs(y) < 9.2e18) {
    const auto yi = static_cast<int64_t>(y);
    return a.AsInt() < yi ? -1 : a.AsInt() > yi ? 1 : 0;
  }
  if (b.kind() != Value::Kind::kFloat && std::fabs(x) < 9.2e18) {
    const auto xi = static_cast<int64_t>(x);
    return xi < b.AsInt() ? -1 : xi > b.AsInt() ? 1 : 0;
  }
  return 0;
}

// [1] == (1,) is False in Python: sequences of different types never compare equal.
bool SequencesComparable(const Value& a, const Value& b) { return a.AsList().kind == b.AsList().kind; }

bool EqualsAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return false;
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.AsString() == b.AsString();
    case Value::Kind::kList: {
      if (!SequencesComparable(a, b)) return false;
      const auto& x = a.AsList().items;
      const auto& y = b.AsList().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!EqualsAt(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.AsDict();
      const DictData& y = b.AsDict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, value] : x.entries) {
        const Value* other = y.Find(key);
        if (other == nullptr || !EqualsAt(value, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kIterator:
    case Value::Kind::kObject:
    case Value::Kind::kCallable:
      return a.SameObject(b);
  }
  return false;
}

absl::StatusOr<int> CompareAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return absl::InvalidArgumentError("values nest too deeply to compare");
  if (a.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(a));
  if (b.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(b));
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b);
  if (a.is_string() && b.is_string()) {
    const int c = a.AsString().compare(b.AsString());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.kind() == Value::Kind::kList && b.kind() == Value::Kind::kList && a.AsList().kind == b.AsList().kind &&
      (a.AsList().kind == SequenceKind::kList || a.AsList().kind == SequenceKind::kTuple)) {
    const auto& x = a.AsList().items;
    const auto& y = b.AsList().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!EqualsAt(x[i], y[i], depth + 1)) return CompareAt(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return absl::InvalidArgumentError(absl::StrCat("'<' not supported between instances of '", a.TypeName(), "' and '",
                                                 b.TypeName(), "'"));
}

absl::StatusOr<std::string> JoinReprs(const std::vector<Value>& items, int depth) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    auto repr = ToPythonRepr(items[i], depth + 1);
    if (!repr.ok()) return repr.status();
    out += *repr;
  }
  return out;
}

}  // namespace

ListData::~ListData() { ReleaseValues(&items); }

DictData::~DictData() {
  std::vector<Value> values;
  values.reserve(entries.size() * 2);
  for (auto& [key, value] : entries) {
    values.push_back(std::move(key));
    values.push_back(std::move(value));
  }
  entries.clear();
  ReleaseValues(&values);
}

IteratorData::~IteratorData() { ReleaseValues(&items); }

const Value* DictData::Find(const Value& key) const {
  if (key.is_string()) return FindString(key.AsString());
  auto hash = HashKey(key);
  if (!hash.ok()) return nullptr;
  const auto it = index.find(*hash);
  return it == index.end() ? nullptr : &entries[it->second].second;
}

const Value* DictData::FindString(std::string_view key) const {
  std::string hash;
  hash.reserve(key.size() + 1);
  hash.push_back('s');
  hash.append(key);
  const auto it = index.find(hash);
  return it == index.end() ? nullptr : &entries[it->second].second;
}

Value Value::Undefined(UndefinedData data) {
  return Value(Storage(std::in_place_index<0>, std::make_shared<const UndefinedData>(std::move(data))));
}
Value Value::None() { return Value(Storage(std::in_place_index<1>, NoneTag{})); }
Value Value::Bool(bool value) { return Value(Storage(std::in_place_index<2>, value)); }
Value Value::Int(int64_t value) { return Value(Storage(std::in_place_index<3>, value)); }
Value Value::Float(double value) { return Value(Storage(std::in_place_index<4>, value)); }
Value Value::String(std::string text) {
  return Value(Storage(std::in_place_index<5>, StringPayload{std::make_shared<const std::string>(std::move(text)), false}));
}
Value Value::Markup(std::string text) {
  return Value(Storage(std::in_place_index<5>, StringPayload{std::make_shared<const std::string>(std::move(text)), true}));
}

Value Value::List(std::vector<Value> items, SequenceKind kind) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->kind = kind;
  return Value(Storage(std::in_place_index<6>, std::shared_ptr<const ListData>(std::move(data))));
}

Value Value::Range(int64_t start, int64_t stop, int64_t step, std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->kind = SequenceKind::kRange;
  data->range_start = start;
  data->range_stop = stop;
  data->range_step = step;
  return Value(Storage(std::in_place_index<6>, std::shared_ptr<const ListData>(std::move(data))));
}

absl::StatusOr<Value> Value::Dict(std::vector<std::pair<Value, Value>> entries) {
  auto data = std::make_shared<DictData>();
  data->entries.reserve(entries.size());
  for (auto& [key, value] : entries) {
    auto hash = HashKey(key);
    if (!hash.ok()) return hash.status();
    const auto [it, inserted] = data->index.emplace(std::move(*hash), data->entries.size());
    if (inserted) {
      data->entries.emplace_back(std::move(key), std::move(value));
    } else {
      data->entries[it->second].second = std::move(value);
    }
  }
  return Value(Storage(std::in_place_index<7>, std::shared_ptr<const DictData>(std::move(data))));
}

Value Value::Iterator(std::vector<Value> items, std::string type_name) {
  auto data = std::make_shared<IteratorData>();
  data->items = std::move(items);
  data->type_name = std::move(type_name);
  return Value(Storage(std::in_place_index<8>, std::move(data)));
}

Value Value::FromObject(std::shared_ptr<Object> object) { return Value(Storage(std::in_place_index<9>, std::move(object))); }

Value Value::FromCallable(std::shared_ptr<const Callable> callable) {
  return Value(Storage(std::in_place_index<10>, std::move(callable)));
}

bool Value::is_list(SequenceKind sequence) const { return kind() == Kind::kList && AsList().kind == sequence; }

int64_t Value::AsInt() const { return kind() == Kind::kBool ? (AsBool() ? 1 : 0) : std::get<int64_t>(storage_); }

double Value::AsDouble() const {
  return kind() == Kind::kFloat ? std::get<double>(storage_) : static_cast<double>(AsInt());
}

bool Value::IsMarkup() const { return is_string() && std::get<StringPayload>(storage_).markup; }

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return AsBool();
    case Kind::kInt:
      return AsInt() != 0;
    case Kind::kFloat:
      return AsDouble() != 0.0;
    case Kind::kString:
      return !AsString().empty();
    case Kind::kList:
      return !AsList().items.empty();
    case Kind::kDict:
      return !AsDict().entries.empty();
    case Kind::kIterator:
    case Kind::kObject:
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return IsMarkup() ? "Markup" : "str";
    case Kind::kList:
      switch (AsList().kind) {
        case SequenceKind::kList:
          return "list";
        case SequenceKind::kTuple:
          return "tuple";
        case SequenceKind::kDictItems:
          return "dict_items";
        case SequenceKind::kDictKeys:
          return "dict_keys";
        case SequenceKind::kDictValues:
          return "dict_values";
        case SequenceKind::kRange:
          return "range";
      }
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kIterator:
      return AsIterator().type_name;
    case Kind::kObject:
      return AsObject().TypeName();
    case Kind::kCallable:
      return AsCallable().TypeName();
  }
  return "object";
}

bool Value::SameObject(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kList:
      return &AsList() == &other.AsList();
    case Kind::kDict:
      return &AsDict() == &other.AsDict();
    case Kind::kIterator:
      return &AsIterator() == &other.AsIterator();
    case Kind::kObject:
      return &AsObject() == &other.AsObject();
    case Kind::kCallable:
      return &AsCallable() == &other.AsCallable();
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return AsBool() == other.AsBool();
    case Kind::kInt:
      return AsInt() == other.AsInt();
    case Kind::kFloat:
      return AsDouble() == other.AsDouble();
    case Kind::kString:
      return &AsString() == &other.AsString();
  }
  return false;
}

bool Value::HoldsValues() const {
  switch (kind()) {
    case Kind::kList:
    case Kind::kDict:
    case Kind::kIterator:
    case Kind::kObject:
    case Kind::kCallable:
      return true;
    case Kind::kUndefined:
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kString:
      return false;
  }
  return false;
}

std::string UndefinedMessage(const Value& undefined) {
  const UndefinedData* data = undefined.AsUndefined();
  if (data == nullptr) return "the value is undefined";
  if (!data->hint.empty()) return data->hint;
  if (data->owner.empty()) return absl::StrCat(PythonStringRepr(data->name), " is undefined");
  if (data->element) return absl::StrCat(data->owner, " object has no element ", data->name);
  return absl::StrCat("'", data->owner, " object' has no attribute ", PythonStringRepr(data->name));
}

bool PythonEquals(const Value& a, const Value& b) { return EqualsAt(a, b, 0); }

absl::StatusOr<int> PythonCompare(const Value& a, const Value& b) { return CompareAt(a, b, 0); }

absl::StatusOr<std::string> HashKey(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kUndefined:
      return std::string("u");
    case Value::Kind::kNone:
      return std::string("n");
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return absl::StrCat("i", key.AsInt());
    case Value::Kind::kFloat: {
      const double d = key.AsDouble();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18) {
        return absl::StrCat("i", static_cast<int64_t>(d));
      }
      return absl::StrCat("f", PythonFloatRepr(d));
    }
    case Value::Kind::kString:
      return absl::StrCat("s", key.AsString());
    case Value::Kind::kList:
      if (key.AsList().kind == SequenceKind::kTuple) {
        std::string out = "t";
        for (const Value& item : key.AsList().items) {
          auto part = HashKey(item);
          if (!part.ok()) return part.status();
          absl::StrAppend(&out, part->size(), ":", *part);
        }
        return out;
      }
      break;
    case Value::Kind::kIterator:
      return absl::StrCat("p", reinterpret_cast<uintptr_t>(&key.AsIterator()));
    case Value::Kind::kObject:
      return absl::StrCat("p", reinterpret_cast<uintptr_t>(&key.AsObject()));
    case Value::Kind::kCallable:
      return absl::StrCat("p", reinterpret_cast<uintptr_t>(&key.AsCallable()));
    case Value::Kind::kDict:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("unhashable type: '", key.TypeName(), "'"));
}

absl::StatusOr<std::string> ToPythonStr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return std::string();
    case Value::Kind::kString:
      return value.AsString();
    default:
      return ToPythonRepr(value);
  }
}

absl::StatusOr<std::string> ToPythonRepr(const Value& value, int depth) {
  if (depth > kMaxValueDepth) return absl::InvalidArgumentError("values nest too deeply to print");
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return std::string("Undefined");
    case Value::Kind::kNone:
      return std::string("None");
    case Value::Kind::kBool:
      return std::string(value.AsBool() ? "True" : "False");
    case Value::Kind::kInt:
      return absl::StrCat(value.AsInt());
    case Value::Kind::kFloat:
      return PythonFloatRepr(value.AsDouble());
    case Value::Kind::kString:
      if (value.IsMarkup()) return absl::StrCat("Markup(", PythonStringRepr(value.AsString()), ")");
      return PythonStringRepr(value.AsString());
    case Value::Kind::kList: {
      const ListData& list = value.AsList();
      if (list.kind == SequenceKind::kRange) {
        if (list.range_step == 1) return absl::StrCat("range(", list.range_start, ", ", list.range_stop, ")");
        return absl::StrCat("range(", list.range_start, ", ", list.range_stop, ", ", list.range_step, ")");
      }
      auto inner = JoinReprs(list.items, depth);
      if (!inner.ok()) return inner.status();
      switch (list.kind) {
        case SequenceKind::kList:
          return absl::StrCat("[", *inner, "]");
        case SequenceKind::kTuple:
          return absl::StrCat("(", *inner, list.items.size() == 1 ? ",)" : ")");
        case SequenceKind::kDictItems:
          return absl::StrCat("dict_items([", *inner, "])");
        case SequenceKind::kDictKeys:
          return absl::StrCat("dict_keys([", *inner, "])");
        case SequenceKind::kDictValues:
          return absl::StrCat("dict_values([", *inner, "])");
        case SequenceKind::kRange:
          break;
      }
      return *inner;
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.AsDict().entries) {
        if (!first) out += ", ";
        first = false;
        auto k = ToPythonRepr(key, depth + 1);
        if (!k.ok()) return k.status();
        auto v = ToPythonRepr(item, depth + 1);
        if (!v.ok()) return v.status();
        absl::StrAppend(&out, *k, ": ", *v);
      }
      return out + "}";
    }
    case Value::Kind::kIterator:
      return absl::InvalidArgumentError(absl::StrCat("printing a ", value.TypeName(),
                                                     " is not supported (Python prints its address); apply |list"));
    case Value::Kind::kObject:
      return value.AsObject().Repr(depth);
    case Value::Kind::kCallable:
      return value.AsCallable().Repr();
  }
  return std::string();
}

absl::StatusOr<int64_t> PythonLength(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(value.AsString()));
    case Value::Kind::kList:
      return static_cast<int64_t>(value.AsList().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(value.AsDict().entries.size());
    default:
      return absl::InvalidArgumentError(absl::StrCat("object of type '", value.TypeName(), "' has no len()"));
  }
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>();
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& text = value.AsString();
      for (size_t at = 0; at < text.size();) {
        const size_t start = at;
        NextCodePoint(text, &at);
        chars.push_back(Value::String(text.substr(start, at - start)));
      }
      return chars;
    }
    case Value::Kind::kList:
      return value.AsList().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(value.AsDict().entries.size());
      for (const auto& entry : value.AsDict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kIterator: {
      IteratorData& it = value.AsIterator();
      std::vector<Value> rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.next), it.items.end());
      it.next = it.items.size();
      return rest;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("'", value.TypeName(), "' object is not iterable"));
  }
}

}  // namespace crossreg::jinja

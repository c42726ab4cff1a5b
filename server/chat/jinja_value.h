// The values a chat template computes with, modelled on the Python objects jinja2 gives
// a template: undefined, None, bool, int (64-bit here), float, str (UTF-8, indexed by code
// point; a flag marks markupsafe.Markup), list and tuple (and the dict views and range
// objects that print differently), insertion-ordered dict, one-shot iterators (what
// generator filters return), objects with attributes (namespace, loop) and callables.
//
// Lists, tuples and dicts are immutable once built, as the immutable sandbox Hugging Face
// renders in keeps them; only namespace objects change. Copies share their payload.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg::jinja {

class Value;

// How deep a walk over a value (repr, tojson, comparison) goes before it refuses: values
// nest no deeper in practice, and the walk's stack stays small.
inline constexpr int kMaxValueDepth = 400;

// The Python type behind a sequence: how it prints and whether it can be indexed.
enum class SequenceKind { kList, kTuple, kDictItems, kDictKeys, kDictValues, kRange };

// Why a value is undefined; it renders as "" and fails when used (jinja2's Undefined).
struct UndefinedData {
  std::string name;   // the variable, attribute or key that was missing
  std::string owner;  // Python type name of the object it was looked up on ("" for a variable)
  std::string hint;   // the whole message when the reason is not a missing name
  bool element = false;  // looked up as x[key] with a key that is not a string
};

struct ListData {
  ListData() = default;
  ListData(const ListData&) = delete;
  ListData& operator=(const ListData&) = delete;
  ~ListData();

  std::vector<Value> items;
  SequenceKind kind = SequenceKind::kList;
  int64_t range_start = 0;  // kRange: the arguments that repr() shows
  int64_t range_stop = 0;
  int64_t range_step = 1;
};

struct DictData {
  DictData() = default;
  DictData(const DictData&) = delete;
  DictData& operator=(const DictData&) = delete;
  ~DictData();

  // The entry for `key`, or null (also for an unhashable key).
  const Value* Find(const Value& key) const;
  const Value* FindString(std::string_view key) const;

  std::vector<std::pair<Value, Value>> entries;  // insertion order
  std::unordered_map<std::string, size_t> index;  // HashKey(key) -> position in entries
};

// A one-shot iterator (a generator, a reversed list): iterating it consumes it.
struct IteratorData {
  IteratorData() = default;
  IteratorData(const IteratorData&) = delete;
  IteratorData& operator=(const IteratorData&) = delete;
  ~IteratorData();

  std::vector<Value> items;
  size_t next = 0;
  std::string type_name;  // Python's: "generator", "list_reverseiterator", ...
};

// An object with attributes: namespace() and the loop variable.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string TypeName() const = 0;
  // The attribute, or an undefined value when there is none.
  virtual Value GetAttr(std::string_view name) const = 0;
  virtual absl::StatusOr<std::string> Repr(int depth) const = 0;
  // Drops references to other values, so that cycles through this object end with the
  // render that made them.
  virtual void Clear() {}
};

// Positional and keyword arguments of a call, evaluated.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Something a template can call: a macro, a global function, a bound method.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string TypeName() const = 0;
  // What the template prints for it; an error where Python would print an address.
  virtual absl::StatusOr<std::string> Repr() const = 0;
  virtual absl::StatusOr<Value> Call(CallArgs args) const = 0;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kIterator, kObject, kCallable };

  Value() = default;  // undefined
  static Value Undefined(UndefinedData data);
  static Value None();
  static Value Bool(bool value);
  static Value Int(int64_t value);
  static Value Float(double value);
  static Value String(std::string text);
  static Value Markup(std::string text);
  static Value List(std::vector<Value> items, SequenceKind kind = SequenceKind::kList);
  static Value Tuple(std::vector<Value> items) { return List(std::move(items), SequenceKind::kTuple); }
  static Value Range(int64_t start, int64_t stop, int64_t step, std::vector<Value> items);
  // Later duplicates of a key replace its value in the first key's position, as in Python.
  static absl::StatusOr<Value> Dict(std::vector<std::pair<Value, Value>> entries);
  static Value Iterator(std::vector<Value> items, std::string type_name);
  static Value FromObject(std::shared_ptr<Object> object);
  static Value FromCallable(std::shared_ptr<const Callable> callable);

  Kind kind() const { return static_cast<Kind>(storage_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_int() const { return kind() == Kind::kInt; }  // not bool
  // int, float or bool (bool is an int in Python).
  bool is_number() const { return kind() == Kind::kInt || kind() == Kind::kFloat || kind() == Kind::kBool; }
  // int or bool: what Python accepts as an index or a count.
  bool is_integral() const { return kind() == Kind::kInt || kind() == Kind::kBool; }
  bool is_list(SequenceKind kind) const;

  bool AsBool() const { return std::get<bool>(storage_); }
  // int or bool
  int64_t AsInt() const;
  // int, float or bool
  double AsDouble() const;
  const std::string& AsString() const { return *std::get<StringPayload>(storage_).text; }
  bool IsMarkup() const;
  const ListData& AsList() const { return *std::get<std::shared_ptr<const ListData>>(storage_); }
  const DictData& AsDict() const { return *std::get<std::shared_ptr<const DictData>>(storage_); }
  IteratorData& AsIterator() const { return *std::get<std::shared_ptr<IteratorData>>(storage_); }
  Object& AsObject() const { return *std::get<std::shared_ptr<Object>>(storage_); }
  const std::shared_ptr<Object>& ObjectPtr() const { return std::get<std::shared_ptr<Object>>(storage_); }
  const Callable& AsCallable() const { return *std::get<std::shared_ptr<const Callable>>(storage_); }
  // Why the value is undefined (null when it was made without a reason).
  const UndefinedData* AsUndefined() const { return std::get<std::shared_ptr<const UndefinedData>>(storage_).get(); }

  // Python's bool(x).
  bool Truthy() const;
  // Python's type(x).__name__.
  std::string TypeName() const;
  // Python's `a is b` for objects with identity (lists, dicts, objects, callables).
  bool SameObject(const Value& other) const;
  // Whether destroying this value may destroy nested values (see ListData's destructor).
  bool HoldsValues() const;

 private:
  struct NoneTag {};
  struct StringPayload {
    std::shared_ptr<const std::string> text;
    bool markup = false;
  };
  using Storage = std::variant<std::shared_ptr<const UndefinedData>, NoneTag, bool, int64_t, double, StringPayload,
                               std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                               std::shared_ptr<IteratorData>, std::shared_ptr<Object>, std::shared_ptr<const Callable>>;
  explicit Value(Storage storage) : storage_(std::move(storage)) {}

  Storage storage_;
};

// The message of jinja2's UndefinedError for using `undefined` ("'x' is undefined").
std::string UndefinedMessage(const Value& undefined);

// Python's ==, which never fails (values nested past kMaxValueDepth compare unequal).
bool PythonEquals(const Value& a, const Value& b);
// Python's ordering for <, <=, >, >= and sorting: negative, zero or positive. Fails as
// Python does for types that do not order ("'<' not supported between ...").
absl::StatusOr<int> PythonCompare(const Value& a, const Value& b);
// A string equal for keys Python's dict treats as equal (1, 1.0 and True); fails for
// unhashable values ("unhashable type: 'list'").
absl::StatusOr<std::string> HashKey(const Value& key);

// Python's str(x) (what {{ x }} prints) and repr(x).
absl::StatusOr<std::string> ToPythonStr(const Value& value);
absl::StatusOr<std::string> ToPythonRepr(const Value& value, int depth = 0);

// Python's len(x).
absl::StatusOr<int64_t> PythonLength(const Value& value);
// The items `for x in value` visits: a string's characters, a dict's keys, an
// undefined value's nothing. Consumes an iterator.
absl::StatusOr<std::vector<Value>> Iterate(const Value& value);

}  // namespace crossreg::jinja

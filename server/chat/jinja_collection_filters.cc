#include "server/chat/jinja_collection_filters.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_access.h"
#include "server/chat/jinja_filters.h"
#include "server/chat/jinja_operators.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_tests.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

using Values = std::vector<Value>;

absl::StatusOr<std::string> Text(const Value& v) { return ToPythonStr(v); }

std::vector<std::string> SplitOn(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

// jinja2's make_attrgetter: "a.b.0" looked up item-first, part by part; `fallback`
// replaces an undefined result; `lower` folds strings for case-insensitive keys.
absl::StatusOr<Value> LookupPath(const Value& item, const Value& attribute, const Value& fallback, bool lower,
                                 RenderBudget& budget) {
  Value current = item;
  if (!attribute.is_none()) {
    std::vector<Value> parts;
    if (attribute.is_string()) {
      for (const std::string& part : SplitOn(attribute.AsString(), '.')) {
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (digits) {
          auto n = ParsePythonInt(part);
          if (!n.ok()) return n.status();
          parts.push_back(Value::Int(*n));
        } else {
          parts.push_back(Value::String(std::string(part)));
        }
      }
    } else {
      parts.push_back(attribute);
    }
    for (const Value& part : parts) {
      auto next = GetItem(current, part, &budget);
      if (!next.ok()) return next.status();
      current = *std::move(next);
      if (!fallback.is_none() && current.is_undefined()) current = fallback;
    }
  }
  if (lower && current.is_string()) return Value::String(PythonLower(current.AsString()));
  return current;
}

// Sorts `items` by `keys` (Python's sorted: stable, and reverse keeps equal items in order).
absl::Status SortByKeys(Values* items, const Values& keys, bool reverse) {
  std::vector<size_t> order(items->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status failure;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!failure.ok()) return false;
    auto c = reverse ? PythonCompare(keys[b], keys[a]) : PythonCompare(keys[a], keys[b]);
    if (!c.ok()) {
      failure = c.status();
      return false;
    }
    return *c == -1;
  });
  if (!failure.ok()) return failure;
  Values sorted;
  sorted.reserve(items->size());
  for (size_t i : order) sorted.push_back((*items)[i]);
  *items = std::move(sorted);
  return absl::OkStatus();
}

// Binds `args` to the filter's parameters into `a`, or returns the binding error.
#define BIND(name, ...)                                  \
  auto bound_args = BindArgs(name, args, {__VA_ARGS__}); \
  if (!bound_args.ok()) return bound_args.status();      \
  [[maybe_unused]] const Values& a = *bound_args

}  // namespace

absl::StatusOr<Value> JoinFilter(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("join", {"d", Value::String("")}, {"attribute", Value::None()});
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  auto separator = Text(a[0]);
  if (!separator.ok()) return separator.status();
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    auto item = LookupPath((*items)[i], a[1], Value::None(), false, budget);
    if (!item.ok()) return item.status();
    auto text = Text(*item);
    if (!text.ok()) return text.status();
    if (i > 0) out += *separator;
    out += *text;
    if (auto status = budget.CheckSize(out.size()); !status.ok()) return status;
  }
  if (auto status = budget.ChargeBytes(out.size()); !status.ok()) return status;
  return Value::String(std::move(out));
}

// select, reject, selectattr, rejectattr.
absl::StatusOr<Value> SelectFilter(const Value& in, const CallArgs& args, RenderBudget& budget, bool select,
                                     bool by_attribute) {
  const std::string_view name = by_attribute ? (select ? "selectattr" : "rejectattr") : (select ? "select" : "reject");
  size_t next = 0;
  Value attribute = Value::None();
  if (by_attribute) {
    if (args.positional.empty()) return absl::InvalidArgumentError("Missing parameter for attribute name");
    attribute = args.positional[next++];
  }
  TestFunction test = nullptr;
  CallArgs test_args;
  if (next < args.positional.size()) {
    const Value& test_name = args.positional[next++];
    if (!test_name.is_string() || (test = FindTest(test_name.AsString())) == nullptr) {
      auto repr = ToPythonRepr(test_name);
      return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": no test named ", repr.ok() ? *repr : "?"));
    }
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
    test_args.keywords = args.keywords;
  } else if (!args.keywords.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), "() got an unexpected keyword argument"));
  }
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  Values kept;
  for (const Value& item : *items) {
    if (auto status = budget.Charge(1); !status.ok()) return status;
    auto subject = LookupPath(item, attribute, Value::None(), false, budget);
    if (!subject.ok()) return subject.status();
    bool passes = subject->Truthy();
    if (test != nullptr) {
      auto result = test(*subject, test_args);
      if (!result.ok()) return result.status();
      passes = *result;
    }
    if (passes == select) kept.push_back(item);
  }
  return Value::Iterator(std::move(kept), "generator");
}

absl::StatusOr<Value> MapFilter(const Value& in, const CallArgs& args, RenderBudget& budget) {
  Value attribute = Value::None();
  Value fallback = Value::None();
  FilterFunction filter = nullptr;
  CallArgs filter_args;
  if (args.positional.empty()) {
    bool has_attribute = false;
    for (const auto& [key, value] : args.keywords) {
      if (key == "attribute") {
        attribute = value;
        has_attribute = true;
      } else if (key == "default") {
        fallback = value;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("Unexpected keyword argument '", key, "'"));
      }
    }
    if (!has_attribute) return absl::InvalidArgumentError("map requires a filter argument");
  } else {
    const Value& filter_name = args.positional[0];
    if (!filter_name.is_string() || (filter = FindFilter(filter_name.AsString())) == nullptr) {
      return absl::InvalidArgumentError("map: no filter of that name");
    }
    filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
    filter_args.keywords = args.keywords;
  }
  Values mapped;
  if (in.Truthy()) {
    auto items = Iterate(in);
    if (!items.ok()) return items.status();
    for (const Value& item : *items) {
      if (auto status = budget.Charge(1); !status.ok()) return status;
      auto result = filter != nullptr ? filter(item, filter_args, budget) : LookupPath(item, attribute, fallback, false, budget);
      if (!result.ok()) return result.status();
      mapped.push_back(*std::move(result));
    }
  }
  return Value::Iterator(std::move(mapped), "generator");
}

absl::StatusOr<Value> SortFilter(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("sort", {"reverse", Value::Bool(false)}, {"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()});
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  if (auto status = budget.Charge(static_cast<int64_t>(items->size()) * 8); !status.ok()) return status;
  // Keys are lists, one value per comma-separated attribute, as jinja2's multi-attrgetter.
  std::vector<Value> attributes;
  if (a[2].is_string()) {
    for (const std::string& part : SplitOn(a[2].AsString(), ',')) attributes.push_back(Value::String(part));
  } else {
    attributes.push_back(a[2]);
  }
  Values keys;
  for (const Value& item : *items) {
    Values key;
    for (const Value& attribute : attributes) {
      auto part = LookupPath(item, attribute, Value::None(), !a[1].Truthy(), budget);
      if (!part.ok()) return part.status();
      key.push_back(*std::move(part));
    }
    keys.push_back(Value::List(std::move(key)));
  }
  if (auto status = SortByKeys(&*items, keys, a[0].Truthy()); !status.ok()) return status;
  return Value::List(*std::move(items));
}

absl::StatusOr<Value> DictSortFilter(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("dictsort", {"case_sensitive", Value::Bool(false)}, {"by", Value::String("key")}, {"reverse", Value::Bool(false)});
  if (in.kind() != Value::Kind::kDict) {
    if (in.is_undefined()) return absl::InvalidArgumentError(UndefinedMessage(in));
    return absl::InvalidArgumentError(absl::StrCat("dictsort needs a dict, not ", in.TypeName()));
  }
  if (!a[1].is_string() || (a[1].AsString() != "key" && a[1].AsString() != "value")) {
    return absl::InvalidArgumentError("You can only sort by either \"key\" or \"value\"");
  }
  const size_t position = a[1].AsString() == "key" ? 0 : 1;
  Values items;
  Values keys;
  for (const auto& [key, value] : in.AsDict().entries) {
    items.push_back(Value::Tuple({key, value}));
    const Value& k = position == 0 ? key : value;
    keys.push_back(!a[0].Truthy() && k.is_string() ? Value::String(PythonLower(k.AsString())) : k);
  }
  if (auto status = budget.Charge(static_cast<int64_t>(items.size()) * 8); !status.ok()) return status;
  if (auto status = SortByKeys(&items, keys, a[2].Truthy()); !status.ok()) return status;
  return Value::List(std::move(items));
}

absl::StatusOr<Value> UniqueFilter(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("unique", {"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()});
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  std::unordered_set<std::string> seen;
  Values out;
  for (const Value& item : *items) {
    auto key = LookupPath(item, a[1], Value::None(), !a[0].Truthy(), budget);
    if (!key.ok()) return key.status();
    auto hash = HashKey(*key);
    if (!hash.ok()) return hash.status();
    if (seen.insert(*std::move(hash)).second) out.push_back(item);
  }
  return Value::Iterator(std::move(out), "generator");
}

absl::StatusOr<Value> MinMaxFilter(const Value& in, const CallArgs& args, RenderBudget& budget, bool max) {
  BIND(max ? "max" : "min", {"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()});
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  if (items->empty()) {
    UndefinedData data;
    data.hint = "No aggregated item, sequence was empty.";
    return Value::Undefined(std::move(data));
  }
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items->size(); ++i) {
    auto key = LookupPath((*items)[i], a[1], Value::None(), !a[0].Truthy(), budget);
    if (!key.ok()) return key.status();
    bool better = i == 0;
    if (!better) {
      auto c = PythonCompare(*key, best_key);
      if (!c.ok()) return c.status();
      better = max ? *c == 1 : *c == -1;
    }
    if (better) {
      best = i;
      best_key = *std::move(key);
    }
  }
  return (*items)[best];
}

absl::StatusOr<Value> SumFilter(const Value& in, const CallArgs& args, RenderBudget& budget) {
  BIND("sum", {"attribute", Value::None()}, {"start", Value::Int(0)});
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  Value total = a[1];
  for (const Value& item : *items) {
    auto term = LookupPath(item, a[0], Value::None(), false, budget);
    if (!term.ok()) return term.status();
    auto next = ApplyBinary(BinaryOperator::kAdd, total, *term, budget);
    if (!next.ok()) return next.status();
    total = *std::move(next);
  }
  return total;
}

absl::StatusOr<Value> FirstOrLastFilter(const Value& in, const CallArgs& args, bool first) {
  BIND(first ? "first" : "last");
  if (!first && in.kind() == Value::Kind::kIterator) {
    return absl::InvalidArgumentError(absl::StrCat("'", in.TypeName(), "' object is not reversible"));
  }
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  if (items->empty()) {
    UndefinedData data;
    data.hint = first ? "No first item, sequence was empty." : "No last item, sequence was empty.";
    return Value::Undefined(std::move(data));
  }
  return first ? items->front() : items->back();
}

absl::StatusOr<Value> ReverseFilter(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("reverse");
  if (in.is_string()) {
    std::vector<char32_t> cps = ToCodePoints(in.AsString());
    std::reverse(cps.begin(), cps.end());
    return Value::String(FromCodePoints(cps));
  }
  auto items = Iterate(in);
  if (!items.ok()) return absl::InvalidArgumentError("argument must be iterable");
  std::reverse(items->begin(), items->end());
  // Python's reversed() gives an iterator; a generator is made a reversed list instead.
  switch (in.kind()) {
    case Value::Kind::kIterator:
      return Value::List(*std::move(items));
    case Value::Kind::kDict:
      return Value::Iterator(*std::move(items), "dict_reversekeyiterator");
    case Value::Kind::kList:
      return Value::Iterator(*std::move(items), in.is_list(SequenceKind::kList) ? "list_reverseiterator" : "reversed");
    default:
      return Value::Iterator(*std::move(items), "reversed");
  }
}

absl::StatusOr<Value> BatchFilter(const Value& in, const CallArgs& args, RenderBudget&) {
  BIND("batch", {"linecount", std::nullopt}, {"fill_with", Value::None()});
  if (!a[0].is_integral()) return absl::InvalidArgumentError("batch linecount must be an integer");
  const int64_t count = a[0].AsInt();
  auto items = Iterate(in);
  if (!items.ok()) return items.status();
  Values batches;
  Values current;
  for (const Value& item : *items) {
    if (static_cast<int64_t>(current.size()) == count) {
      batches.push_back(Value::List(std::move(current)));
      current.clear();
    }
    current.push_back(item);
  }
  if (!current.empty()) {
    if (!a[1].is_none()) {
      while (static_cast<int64_t>(current.size()) < count) current.push_back(a[1]);
    }
    batches.push_back(Value::List(std::move(current)));
  }
  return Value::Iterator(std::move(batches), "generator");
}

#undef BIND

}  // namespace crossreg::jinja

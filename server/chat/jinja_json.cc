#include "server/chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_unicode.h"

namespace crossreg::jinja {
namespace {

absl::StatusOr<Value> FromJsonAt(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) {
    return absl::InvalidArgumentError(absl::StrCat("the context nests deeper than ", kMaxValueDepth, " levels"));
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError(absl::StrCat("the context's integer ", u, " does not fit 64 bits"));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: {
      const auto& text = json.get_ref<const std::string&>();
      if (!IsValidUtf8(text)) return absl::InvalidArgumentError("a string of the context is not valid UTF-8");
      return Value::String(text);
    }
    case nlohmann::ordered_json::value_t::binary:
      return absl::InvalidArgumentError("binary values in the context are not supported");
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        auto value = FromJsonAt(item, depth + 1);
        if (!value.ok()) return value.status();
        items.push_back(*std::move(value));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<Value, Value>> entries;
      entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        if (!IsValidUtf8(key)) return absl::InvalidArgumentError("a key of the context is not valid UTF-8");
        auto value = FromJsonAt(item, depth + 1);
        if (!value.ok()) return value.status();
        entries.emplace_back(Value::String(key), *std::move(value));
      }
      return Value::Dict(std::move(entries));
    }
  }
  return Value::None();
}

void AppendJsonString(std::string_view text, bool ensure_ascii, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto append_u = [&](uint32_t unit) {
    *out += {'\\', 'u', kHex[(unit >> 12) & 15], kHex[(unit >> 8) & 15], kHex[(unit >> 4) & 15], kHex[unit & 15]};
  };
  out->push_back('"');
  for (size_t at = 0; at < text.size();) {
    const size_t start = at;
    const char32_t cp = NextCodePoint(text, &at);
    switch (cp) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20) {
      append_u(cp);
    } else if (cp < 0x80 || !ensure_ascii) {
      out->append(text.substr(start, at - start));
    } else if (cp < 0x10000) {
      append_u(cp);
    } else {
      const uint32_t v = cp - 0x10000;
      append_u(0xD800 | (v >> 10));
      append_u(0xDC00 | (v & 0x3FF));
    }
  }
  out->push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return PythonFloatRepr(d);
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options)
      : options_(options),
        item_separator_(options.item_separator.value_or(options.indent.has_value() ? "," : ", ")) {}

  absl::Status Write(const Value& value, int depth) {
    if (depth > kMaxValueDepth) return absl::InvalidArgumentError("values nest too deeply for tojson");
    switch (value.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return absl::OkStatus();
      case Value::Kind::kBool:
        out_ += value.AsBool() ? "true" : "false";
        return absl::OkStatus();
      case Value::Kind::kInt:
        absl::StrAppend(&out_, value.AsInt());
        return absl::OkStatus();
      case Value::Kind::kFloat:
        out_ += JsonFloat(value.AsDouble());
        return absl::OkStatus();
      case Value::Kind::kString:
        AppendJsonString(value.AsString(), options_.ensure_ascii, &out_);
        return absl::OkStatus();
      case Value::Kind::kList:
        if (value.AsList().kind == SequenceKind::kList || value.AsList().kind == SequenceKind::kTuple) {
          return WriteArray(value.AsList().items, depth);
        }
        break;
      case Value::Kind::kDict:
        return WriteObject(value.AsDict(), depth);
      case Value::Kind::kUndefined:
      case Value::Kind::kIterator:
      case Value::Kind::kObject:
      case Value::Kind::kCallable:
        break;
    }
    return absl::InvalidArgumentError(absl::StrCat("Object of type ", value.TypeName(), " is not JSON serializable"));
  }

  std::string Take() { return std::move(out_); }

 private:
  void NewLine(int level) {
    if (!options_.indent.has_value()) return;
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *options_.indent;
  }

  absl::Status WriteArray(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return absl::OkStatus();
    }
    out_.push_back('[');
    NewLine(depth + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) {
        out_ += item_separator_;
        NewLine(depth + 1);
      }
      if (auto status = Write(items[i], depth + 1); !status.ok()) return status;
    }
    NewLine(depth);
    out_.push_back(']');
    return absl::OkStatus();
  }

  absl::Status WriteObject(const DictData& dict, int depth) {
    if (dict.entries.empty()) {
      out_ += "{}";
      return absl::OkStatus();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    entries.reserve(dict.entries.size());
    for (const auto& entry : dict.entries) entries.push_back(&entry);
    if (options_.sort_keys) {
      absl::Status failure;
      std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
        auto order = PythonCompare(a->first, b->first);
        if (!order.ok()) {
          failure = order.status();
          return false;
        }
        return *order < 0;
      });
      if (!failure.ok()) return failure;
    }
    out_.push_back('{');
    NewLine(depth + 1);
    bool first = true;
    for (const auto* entry : entries) {
      if (!first) {
        out_ += item_separator_;
        NewLine(depth + 1);
      }
      first = false;
      const Value& key = entry->first;
      switch (key.kind()) {
        case Value::Kind::kString:
          AppendJsonString(key.AsString(), options_.ensure_ascii, &out_);
          break;
        case Value::Kind::kFloat:
          absl::StrAppend(&out_, "\"", JsonFloat(key.AsDouble()), "\"");
          break;
        case Value::Kind::kBool:
          out_ += key.AsBool() ? "\"true\"" : "\"false\"";
          break;
        case Value::Kind::kInt:
          absl::StrAppend(&out_, "\"", key.AsInt(), "\"");
          break;
        case Value::Kind::kNone:
          out_ += "\"null\"";
          break;
        default:
          return absl::InvalidArgumentError(
              absl::StrCat("keys must be str, int, float, bool or None, not ", key.TypeName()));
      }
      out_ += options_.key_separator;
      if (auto status = Write(entry->second, depth + 1); !status.ok()) return status;
    }
    NewLine(depth);
    out_.push_back('}');
    return absl::OkStatus();
  }

  const JsonDumpOptions& options_;
  const std::string item_separator_;
  std::string out_;
};

}  // namespace

absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json) { return FromJsonAt(json, 0); }

absl::StatusOr<std::string> PythonJsonDumps(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer(options);
  if (auto status = writer.Write(value, 0); !status.ok()) return status;
  return writer.Take();
}

}  // namespace crossreg::jinja

#include "tests/testing/json_schema_validator.h"

#include <cmath>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace crossreg::testing {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string>& KnownKeywords() {
  static const auto* set = new std::set<std::string>{"title",
                                                     "description",
                                                     "$schema",
                                                     "$id",
                                                     "default",
                                                     "examples",
                                                     "$comment",
                                                     "$defs",
                                                     "definitions",
                                                     "type",
                                                     "enum",
                                                     "const",
                                                     "$ref",
                                                     "anyOf",
                                                     "oneOf",
                                                     "allOf",
                                                     "minLength",
                                                     "maxLength",
                                                     "pattern",
                                                     "format",
                                                     "minimum",
                                                     "maximum",
                                                     "exclusiveMinimum",
                                                     "exclusiveMaximum",
                                                     "items",
                                                     "prefixItems",
                                                     "additionalItems",
                                                     "minItems",
                                                     "maxItems",
                                                     "uniqueItems",
                                                     "properties",
                                                     "required",
                                                     "additionalProperties"};
  return *set;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool IsType(const Json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

int Field(const std::smatch& m, int i) { return std::stoi(m[i].str()); }

bool ValidDate(const std::string& s) {
  static const std::regex re("([0-9]{4})-([0-9]{2})-([0-9]{2})");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const int month = Field(m, 2), day = Field(m, 3);
  return month >= 1 && month <= 12 && day >= 1 && day <= kDays[month - 1];
}

bool ValidTime(const std::string& s) {
  static const std::regex re("([0-9]{2}):([0-9]{2}):([0-9]{2})(\\.[0-9]+)?([Zz]|[+-]([0-9]{2}):([0-9]{2}))");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  if (Field(m, 1) > 23 || Field(m, 2) > 59 || Field(m, 3) > 60) return false;
  if (m[6].matched && (Field(m, 6) > 23 || Field(m, 7) > 59)) return false;
  return true;
}

bool ValidFormat(const std::string& format, const std::string& s) {
  if (format == "date") return ValidDate(s);
  if (format == "time") return ValidTime(s);
  if (format == "date-time") {
    const size_t t = s.find_first_of("Tt");
    return t != std::string::npos && ValidDate(s.substr(0, t)) && ValidTime(s.substr(t + 1));
  }
  if (format == "uuid") {
    static const std::regex re("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
    return std::regex_match(s, re);
  }
  return true;  // other formats are annotations
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}

  std::string Check(const Json& doc, const Json& schema, const std::string& path, int depth = 0) {
    if (depth > 200) return path + ": $ref recursion too deep";
    if (schema.is_boolean()) return schema.get<bool>() ? "" : path + ": the schema false admits nothing";
    if (!schema.is_object()) return path + ": the schema is not an object";
    for (const auto& [key, unused] : schema.items()) {
      if (!KnownKeywords().count(key)) return path + ": schema keyword " + key + " not supported by the validator";
    }
    if (schema.contains("$ref")) {
      const Json* target = Resolve(schema["$ref"].get<std::string>());
      if (target == nullptr) return path + ": unresolvable $ref " + schema["$ref"].dump();
      if (std::string e = Check(doc, *target, path, depth + 1); !e.empty()) return e;
    }
    if (schema.contains("type")) {
      const Json& type = schema["type"];
      bool ok = false;
      if (type.is_string()) {
        ok = IsType(doc, type.get<std::string>());
      } else {
        for (const Json& t : type) ok = ok || IsType(doc, t.get<std::string>());
      }
      if (!ok) return path + ": expected type " + type.dump() + ", got " + doc.dump();
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const Json& v : schema["enum"]) found = found || v == doc;
      if (!found) return path + ": " + doc.dump() + " is not one of " + schema["enum"].dump();
    }
    if (schema.contains("const") && !(schema["const"] == doc)) {
      return path + ": expected " + schema["const"].dump() + ", got " + doc.dump();
    }
    if (schema.contains("allOf")) {
      for (const Json& sub : schema["allOf"]) {
        if (std::string e = Check(doc, sub, path, depth + 1); !e.empty()) return e;
      }
    }
    if (schema.contains("anyOf")) {
      std::string first;
      bool any = false;
      for (const Json& sub : schema["anyOf"]) {
        std::string e = Check(doc, sub, path, depth + 1);
        if (e.empty()) any = true;
        if (first.empty()) first = e;
      }
      if (!any) return path + ": matches no anyOf alternative (first: " + first + ")";
    }
    if (schema.contains("oneOf")) {
      int matches = 0;
      for (const Json& sub : schema["oneOf"]) matches += Check(doc, sub, path, depth + 1).empty();
      if (matches != 1) return path + ": matches " + std::to_string(matches) + " oneOf alternatives, not 1";
    }
    if (doc.is_string()) return CheckString(doc.get<std::string>(), schema, path);
    if (doc.is_number()) return CheckNumber(doc.get<double>(), schema, path);
    if (doc.is_array()) return CheckArray(doc, schema, path, depth);
    if (doc.is_object()) return CheckObject(doc, schema, path, depth);
    return "";
  }

 private:
  const Json* Resolve(const std::string& ref) const {
    if (ref == "#") return &root_;
    for (const std::string container : {"$defs", "definitions"}) {
      const std::string prefix = "#/" + container + "/";
      if (ref.compare(0, prefix.size(), prefix) != 0) continue;
      std::string key;
      const std::string escaped = ref.substr(prefix.size());
      for (size_t i = 0; i < escaped.size(); ++i) {
        if (escaped[i] == '~' && i + 1 < escaped.size()) {
          key += escaped[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          key += escaped[i];
        }
      }
      if (root_.contains(container) && root_[container].contains(key)) return &root_[container][key];
    }
    return nullptr;
  }

  static std::string CheckString(const std::string& s, const Json& schema, const std::string& path) {
    const size_t n = CodePoints(s);
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) {
      return path + ": shorter than minLength " + schema["minLength"].dump();
    }
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) {
      return path + ": longer than maxLength " + schema["maxLength"].dump();
    }
    if (schema.contains("pattern")) {
      const std::regex re(schema["pattern"].get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(s, re)) return path + ": does not match pattern " + schema["pattern"].dump();
    }
    if (schema.contains("format") && !ValidFormat(schema["format"].get<std::string>(), s)) {
      return path + ": not a valid " + schema["format"].get<std::string>();
    }
    return "";
  }

  static std::string CheckNumber(double v, const Json& schema, const std::string& path) {
    const auto flag = [&](const char* k) {
      return schema.contains(k) && schema[k].is_boolean() && schema[k].get<bool>();
    };
    const auto number = [&](const char* k) { return schema.contains(k) && schema[k].is_number(); };
    if (number("minimum")) {
      const double m = schema["minimum"].get<double>();
      if (flag("exclusiveMinimum") ? !(v > m) : !(v >= m)) return path + ": below minimum " + schema["minimum"].dump();
    }
    if (number("maximum")) {
      const double m = schema["maximum"].get<double>();
      if (flag("exclusiveMaximum") ? !(v < m) : !(v <= m)) return path + ": above maximum " + schema["maximum"].dump();
    }
    if (number("exclusiveMinimum") && !(v > schema["exclusiveMinimum"].get<double>())) {
      return path + ": not above exclusiveMinimum " + schema["exclusiveMinimum"].dump();
    }
    if (number("exclusiveMaximum") && !(v < schema["exclusiveMaximum"].get<double>())) {
      return path + ": not below exclusiveMaximum " + schema["exclusiveMaximum"].dump();
    }
    return "";
  }

  std::string CheckArray(const Json& doc, const Json& schema, const std::string& path, int depth) {
    if (schema.contains("minItems") && doc.size() < schema["minItems"].get<size_t>()) {
      return path + ": fewer than minItems " + schema["minItems"].dump();
    }
    if (schema.contains("maxItems") && doc.size() > schema["maxItems"].get<size_t>()) {
      return path + ": more than maxItems " + schema["maxItems"].dump();
    }
    if (schema.contains("uniqueItems") && schema["uniqueItems"].get<bool>()) {
      for (size_t i = 0; i < doc.size(); ++i) {
        for (size_t j = i + 1; j < doc.size(); ++j) {
          if (doc[i] == doc[j])
            return path + ": items " + std::to_string(i) + " and " + std::to_string(j) + " are equal";
        }
      }
    }
    const Json* tuple = nullptr;
    const Json* rest = nullptr;
    if (schema.contains("prefixItems")) {
      tuple = &schema["prefixItems"];
      if (schema.contains("items")) rest = &schema["items"];
    } else if (schema.contains("items") && schema["items"].is_array()) {
      tuple = &schema["items"];
      if (schema.contains("additionalItems")) rest = &schema["additionalItems"];
    } else if (schema.contains("items")) {
      rest = &schema["items"];
    }
    for (size_t i = 0; i < doc.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      const Json* sub = tuple != nullptr && i < tuple->size() ? &(*tuple)[i] : rest;
      if (sub == nullptr) continue;
      if (std::string e = Check(doc[i], *sub, at, depth + 1); !e.empty()) return e;
    }
    return "";
  }

  std::string CheckObject(const Json& doc, const Json& schema, const std::string& path, int depth) {
    if (schema.contains("required")) {
      for (const Json& key : schema["required"]) {
        if (!doc.contains(key.get<std::string>())) return path + ": missing required property " + key.dump();
      }
    }
    const Json empty = Json::object();
    const Json& props = schema.contains("properties") ? schema["properties"] : empty;
    for (const auto& [key, value] : doc.items()) {
      const std::string at = path + "." + key;
      if (props.contains(key)) {
        if (std::string e = Check(value, props[key], at, depth + 1); !e.empty()) return e;
      } else if (schema.contains("additionalProperties")) {
        const Json& additional = schema["additionalProperties"];
        if (additional.is_boolean() && !additional.get<bool>()) return at + ": additional property not allowed";
        if (std::string e = Check(value, additional, at, depth + 1); !e.empty()) return e;
      }
    }
    return "";
  }

  const Json& root_;
};

}  // namespace

std::string ValidateJsonAgainstSchema(const nlohmann::ordered_json& doc, const nlohmann::ordered_json& schema) {
  try {
    return Validator(schema).Check(doc, schema, "$");
  } catch (const std::exception& e) {
    return std::string("$: the schema could not be applied: ") + e.what();
  }
}

}  // namespace crossreg::testing

#include "engine/grammar/json_schema_grammar.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/regex_grammar.h"
#include "engine/io/bounded_json.h"
#include "nlohmann/json.hpp"

namespace crossreg::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Rules every grammar may share, emitted only when used (with what they refer to).
struct SharedRule {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

const std::vector<SharedRule>& SharedRules() {
  static const auto* rules = new std::vector<SharedRule>{
      // Compact JSON: with no whitespace to choose, the structure between values
      // (keys, quotes, brackets, commas) is text the grammar forces, which the
      // n-gram mode drafts for free (GrammarState::ForcedTokens).
      {"ws", R"("")", {}},
      {"value",
       "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" ws ( member ( ws "," ws member )* ws )? "}")", {"ws", "member"}},
      {"member", R"(string ws ":" ws value)", {"string", "ws", "value"}},
      {"array", R"("[" ws ( value ( ws "," ws value )* ws )? "]")", {"ws", "value"}},
      {"string", R"("\"" char* "\"")", {"char"}},
      // Raw characters, short escapes, \u escapes; surrogates only as a high-low pair.
      {"char",
       R"([^\x22\x5C\x00-\x1F] | "\\" ( [\x22\x5C/bfnrt] | "u" hex-bmp | )"
       R"("u" [dD] [89abAB] hex hex "\\u" [dD] [c-fC-F] hex hex ))",
       {"hex-bmp", "hex"}},
      {"hex-bmp", "( [0-9a-cA-CeEfF] hex | [dD] [0-7] ) hex hex", {"hex"}},
      {"hex", "[0-9a-fA-F]", {}},
      {"number", R"("-"? uint frac? exp?)", {"uint", "frac", "exp"}},
      {"number-nonneg", "uint frac? exp?", {"uint", "frac", "exp"}},
      // > 0: a non-zero integer part, or 0 and a fraction with a non-zero digit.
      {"number-pos", R"([1-9] [0-9]{0,15} frac? exp? | "0." "0"{0,15} [1-9] [0-9]{0,15} exp?)", {"frac", "exp"}},
      {"integer", R"("-"? uint)", {"uint"}},
      // Digits are bounded (16 before the point, 16 after it, a 2-digit exponent): every
      // value a double holds stays writable, and a model cannot write digits forever.
      {"uint", R"("0" | [1-9] [0-9]{0,15})", {}},
      {"frac", R"("." [0-9]{1,16})", {}},
      {"exp", R"([eE] ( "+" | "-" )? [0-9]{1,2})", {}},
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
      // RFC 3339 full-date; days checked against the month, 29 February in every year.
      {"format-date",
       R"([0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | )"
       R"(( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | [12] [0-9] ) ))",
       {}},
      // RFC 3339 full-time: hh:mm:ss, a fraction, and Z or an offset (a leap second 60 allowed).
      {"format-time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" ( [0-5] [0-9] | "60" ) ( "." [0-9]{1,9} )? )"
       R"(( [Zz] | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"format-date-time", "format-date [Tt] format-time", {"format-date", "format-time"}},
      {"format-uuid", R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})", {"hex"}},
  };
  return *rules;
}

// The shared rules `used` needs, in table order.
std::string SharedRulesText(std::set<std::string> used) {
  const auto& table = SharedRules();
  for (bool grew = true; grew;) {
    grew = false;
    for (const SharedRule& rule : table) {
      if (!used.count(rule.name)) continue;
      for (const char* dep : rule.uses) grew = used.insert(dep).second || grew;
    }
  }
  std::string out;
  for (const SharedRule& rule : table) {
    if (used.count(rule.name)) absl::StrAppend(&out, rule.name, " ::= ", rule.body, "\n");
  }
  return out;
}

const std::set<std::string>& Annotations() {
  static const auto* set =
      new std::set<std::string>{"title", "description", "$schema", "$id", "default", "examples", "$comment"};
  return *set;
}
const std::set<std::string>& Containers() {
  static const auto* set = new std::set<std::string>{"$defs", "definitions"};
  return *set;
}
const std::set<std::string>& Assertions() {
  static const auto* set = new std::set<std::string>{"type",
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
const std::vector<std::string>& TypeNames() {
  static const auto* names =
      new std::vector<std::string>{"object", "array", "string", "number", "integer", "boolean", "null"};
  return *names;
}

absl::Status Error(const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

std::string Sep() { return R"(ws "," ws )"; }

// Joins non-empty pieces of a sequence.
std::string Seq(std::initializer_list<std::string> parts) {
  std::vector<std::string> kept;
  for (const std::string& p : parts) {
    if (!p.empty()) kept.push_back(p);
  }
  return absl::StrJoin(kept, " ");
}

// Parenthesised when it holds an alternation (harmless when the bar is nested deeper).
std::string Group(const std::string& text) { return text.find(" | ") == std::string::npos ? text : "( " + text + " )"; }

// `atom` repeated lo..hi times (hi -1: unbounded); "" when it may only appear 0 times.
std::string Quantify(const std::string& atom, int64_t lo, int64_t hi) {
  if (hi == 0) return "";
  if (lo == 1 && hi == 1) return atom;
  if (lo == 0 && hi < 0) return atom + "*";
  if (lo == 1 && hi < 0) return atom + "+";
  if (lo == 0 && hi == 1) return atom + "?";
  if (lo == hi) return absl::StrCat(atom, "{", lo, "}");
  if (hi < 0) return absl::StrCat(atom, "{", lo, ",}");
  return absl::StrCat(atom, "{", lo, ",", hi, "}");
}

std::string DigitClass(char lo, char hi) {
  if (lo == hi) return absl::StrCat("\"", std::string(1, lo), "\"");
  return absl::StrCat("[", std::string(1, lo), "-", std::string(1, hi), "]");
}

// Digit strings of a's length between a and b (a <= b, both that long).
std::string SameLengthRange(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return absl::StrCat("\"", a, "\"");
  const std::string rest_a = a.substr(1), rest_b = b.substr(1);
  if (a[0] == b[0]) return Seq({DigitClass(a[0], a[0]), Group(SameLengthRange(rest_a, rest_b))});
  const size_t n = rest_a.size();
  const bool a_low = rest_a.find_first_not_of('0') == std::string::npos;
  const bool b_high = rest_b.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alternatives;
  char mid_lo = a[0], mid_hi = b[0];
  if (!a_low) {
    alternatives.push_back(Seq({DigitClass(a[0], a[0]), Group(SameLengthRange(rest_a, std::string(n, '9')))}));
    ++mid_lo;
  }
  if (!b_high) --mid_hi;
  if (mid_lo <= mid_hi) {
    alternatives.push_back(
        Seq({DigitClass(mid_lo, mid_hi), Quantify("[0-9]", static_cast<int64_t>(n), static_cast<int64_t>(n))}));
  }
  if (!b_high)
    alternatives.push_back(Seq({DigitClass(b[0], b[0]), Group(SameLengthRange(std::string(n, '0'), rest_b))}));
  return absl::StrJoin(alternatives, " | ");
}

int64_t PowerOf10(size_t digits) {
  int64_t p = 1;
  for (size_t i = 0; i < digits; ++i) p *= 10;
  return p;
}

// Integers in [lo, hi] (hi nullopt: unbounded), 0 <= lo, spelled without leading zeros.
std::string UnsignedRange(int64_t lo, std::optional<int64_t> hi) {
  const size_t lo_digits = std::to_string(lo).size();
  std::vector<std::string> alternatives;
  if (hi) {
    const size_t hi_digits = std::to_string(*hi).size();
    for (size_t d = lo_digits; d <= hi_digits; ++d) {
      const int64_t a = d == lo_digits ? lo : PowerOf10(d - 1);
      const int64_t b = d == hi_digits ? *hi : PowerOf10(d) - 1;
      alternatives.push_back(SameLengthRange(std::to_string(a), std::to_string(b)));
    }
  } else {
    alternatives.push_back(SameLengthRange(std::to_string(lo), std::to_string(PowerOf10(lo_digits) - 1)));
    alternatives.push_back(Seq({"[1-9]", Quantify("[0-9]", static_cast<int64_t>(lo_digits), -1)}));
  }
  return absl::StrJoin(alternatives, " | ");
}

// Integers in [lo, hi], either side optional, lo <= hi.
std::string IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alternatives;
  const int64_t nonneg_lo = lo ? std::max<int64_t>(*lo, 0) : 0;
  if (!hi || *hi >= nonneg_lo) alternatives.push_back(UnsignedRange(nonneg_lo, hi));
  const int64_t neg_hi = hi ? std::min<int64_t>(*hi, -1) : -1;
  if (!lo || *lo <= neg_hi) {
    const std::optional<int64_t> magnitude_hi = lo ? std::optional<int64_t>(-*lo) : std::nullopt;
    alternatives.push_back(Seq({"\"-\"", Group(UnsignedRange(-neg_hi, magnitude_hi))}));
  }
  return absl::StrJoin(alternatives, " | ");
}

// Whether `v` nests fewer than `levels` arrays or objects (dump() recurses per level).
bool ShallowerThan(const Json& v, int levels) {
  if (!v.is_structured()) return true;
  if (levels <= 1) return false;
  return std::all_of(v.begin(), v.end(), [&](const Json& child) { return ShallowerThan(child, levels - 1); });
}

bool MatchesType(const Json& v, const std::string& type) {
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

// A rule name from a hint: letters and digits, runs of anything else as one '-'. The
// last '-'-separated part never is all digits: gbnf_parser.cc names the rules of
// parenthesised groups "<rule>-<number>", and a name of ours defined after such a group
// must not be taken already.
std::string Sanitize(const std::string& hint) {
  std::string out;
  for (char c : hint) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (keep) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.empty()) return "x";
  const size_t last = out.rfind('-') == std::string::npos ? 0 : out.rfind('-') + 1;
  if (out.find_first_not_of("0123456789", last) == std::string::npos) out.insert(last, "n");
  return out;
}

class Converter {
 public:
  absl::StatusOr<std::string> Run(std::string_view text, const std::string& root) {
    // A schema is a client's text: bounded while parsed (engine/io/bounded_json.h).
    auto parsed = ParseBoundedJson(text, JsonLimits{}, "json_schema");
    if (!parsed.ok()) return parsed.status();
    root_ = *std::move(parsed);
    try {
      for (const SharedRule& rule : SharedRules()) used_names_.insert(rule.name);
      used_names_.insert(root);
      refs_["#"] = root;
      unguarded_.insert("#");
      if (absl::Status s = DefineAs(root, root_, "json_schema"); !s.ok()) return s;
    } catch (const Json::exception& e) {
      return Error("json_schema", e.what());
    }
    std::string out;
    for (const auto& [name, body] : rules_) {
      if (name.empty()) {
        out += body;  // rules from RegexToJsonStringGbnf
      } else {
        absl::StrAppend(&out, name, " ::= ", body, "\n");
      }
    }
    return out + SharedRulesText(used_shared_);
  }

 private:
  // While the children of an object or array are converted, the references on the way
  // there no longer form left recursion: the bracket consumed a character.
  class GuardScope {
   public:
    explicit GuardScope(Converter* c) : c_(c), saved_(std::move(c->unguarded_)) { c_->unguarded_.clear(); }
    ~GuardScope() { c_->unguarded_ = std::move(saved_); }

   private:
    Converter* c_;
    std::set<std::string> saved_;
  };

  std::string Use(const std::string& shared) {
    used_shared_.insert(shared);
    return shared;
  }

  // Whether `name` is used, or lies in the name space of rules regex_grammar.h defines
  // under a prefix of ours ("<prefix>-any", "<prefix>-t3").
  bool Taken(const std::string& name) const {
    if (used_names_.count(name)) return true;
    return std::any_of(prefixes_.begin(), prefixes_.end(),
                       [&](const std::string& p) { return name.compare(0, p.size() + 1, p + "-") == 0; });
  }

  std::string Reserve(const std::string& hint) {
    const std::string base = Sanitize(hint);
    std::string name = base;
    for (int i = 2; Taken(name); ++i) name = absl::StrCat(base, "-n", i);
    used_names_.insert(name);
    return name;
  }

  // A rule name whose "<name>-..." space is free too, for rules made elsewhere.
  std::string ReservePrefix(const std::string& hint) {
    const std::string base = Sanitize(hint);
    for (int i = 1;; ++i) {
      const std::string name = i == 1 ? base : absl::StrCat(base, "-n", i);
      if (Taken(name)) continue;
      const auto next = used_names_.lower_bound(name + "-");
      if (next != used_names_.end() && next->compare(0, name.size() + 1, name + "-") == 0) continue;
      used_names_.insert(name);
      prefixes_.push_back(name);
      return name;
    }
  }

  // A rule `name` for schema `s`; parents are listed before their children.
  absl::Status DefineAs(const std::string& name, const Json& s, const std::string& path) {
    const size_t index = rules_.size();
    rules_.emplace_back(name, "");
    auto body = Body(s, path, name);
    if (!body.ok()) return body.status();
    rules_[index].second = *std::move(body);
    return absl::OkStatus();
  }

  // The expression for a value matching `s`: a shared rule when `s` is just a type, else
  // a rule of its own named after `hint`.
  absl::StatusOr<std::string> Expr(const Json& s, const std::string& path, const std::string& hint) {
    if (s.is_boolean() && s.get<bool>()) return Use("value");
    if (s.is_object()) {
      std::vector<std::string> keys;
      for (const auto& [key, unused] : s.items()) {
        if (!Annotations().count(key) && !Containers().count(key)) keys.push_back(key);
      }
      if (keys.empty()) return Use("value");
      if (keys.size() == 1 && keys[0] == "$ref") return Ref(s["$ref"], path + ".$ref");
      if (keys.size() == 1 && keys[0] == "type" && s["type"].is_string()) {
        const std::string type = s["type"].get<std::string>();
        if (type == "boolean" || type == "null" || type == "integer" || type == "number" || type == "string" ||
            type == "object" || type == "array") {
          return Use(type);
        }
      }
    }
    const std::string name = Reserve(hint);
    if (absl::Status status = DefineAs(name, s, path); !status.ok()) return status;
    return name;
  }

  absl::StatusOr<std::string> Ref(const Json& ref_json, const std::string& path) {
    if (!ref_json.is_string()) return Error(path, "must be a string");
    const std::string ref = ref_json.get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) {
      if (unguarded_.count(ref)) {
        return Error(path, absl::StrCat("\"", ref,
                                        "\" refers back to itself without an object or array in between "
                                        "(left recursion) not supported"));
      }
      return it->second;
    }
    std::string container, key;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.compare(0, p.size(), p) == 0) {
        container = p.substr(2, p.size() - 3);
        key = ref.substr(p.size());
      }
    }
    if (container.empty() || key.find('/') != std::string::npos) {
      return Error(path, absl::StrCat("only local references \"#\", \"#/$defs/<name>\" and \"#/definitions/<name>\" "
                                      "are supported, got \"",
                                      ref, "\""));
    }
    // JSON Pointer escapes.
    std::string unescaped;
    for (size_t i = 0; i < key.size(); ++i) {
      if (key[i] == '~' && i + 1 < key.size() && (key[i + 1] == '0' || key[i + 1] == '1')) {
        unescaped += key[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        unescaped += key[i];
      }
    }
    if (!root_.is_object() || !root_.contains(container) || !root_[container].is_object() ||
        !root_[container].contains(unescaped)) {
      return Error(path, absl::StrCat("\"", ref, "\" does not resolve"));
    }
    const std::string name = Reserve("def-" + unescaped);
    refs_[ref] = name;
    unguarded_.insert(ref);
    absl::Status status =
        DefineAs(name, root_[container][unescaped], absl::StrCat("json_schema.", container, ".", unescaped));
    unguarded_.erase(ref);
    if (!status.ok()) return status;
    return name;
  }

  absl::StatusOr<std::string> Body(const Json& s, const std::string& path, const std::string& name) {
    // The conversion recurses once per level of the schema.
    constexpr int kMaxDepth = 64;
    struct DepthScope {
      explicit DepthScope(int* d) : depth(d) { ++*depth; }
      ~DepthScope() { --*depth; }
      int* depth;
    } scope(&depth_);
    if (depth_ > kMaxDepth)
      return Error(path, absl::StrCat("schemas nested deeper than ", kMaxDepth, " not supported"));
    if (s.is_boolean()) {
      if (s.get<bool>()) return Use("value");
      return Error(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return Error(path, "a schema must be an object or a boolean");
    std::vector<std::string> assertions;
    for (const auto& [key, unused] : s.items()) {
      if (Annotations().count(key) || Containers().count(key)) continue;
      if (!Assertions().count(key)) return Error(absl::StrCat(path, ".", key), "not supported");
      assertions.push_back(key);
    }
    for (const char* combinator : {"$ref", "allOf", "anyOf", "oneOf"}) {
      if (!s.contains(combinator)) continue;
      for (const std::string& key : assertions) {
        if (key != combinator)
          return Error(absl::StrCat(path, ".", key), absl::StrCat("not supported next to ", combinator));
      }
      const std::string at = absl::StrCat(path, ".", combinator);
      if (std::string(combinator) == "$ref") return Ref(s["$ref"], at);
      const Json& subs = s[combinator];
      if (!subs.is_array() || subs.empty()) return Error(at, "must be a non-empty array of schemas");
      if (std::string(combinator) == "allOf") {
        if (subs.size() != 1) return Error(at, "only a single subschema is supported");
        return Body(subs[0], at + "[0]", name);
      }
      std::vector<std::string> alternatives;
      for (size_t i = 0; i < subs.size(); ++i) {
        if (subs[i].is_boolean() && !subs[i].get<bool>()) continue;
        auto expr = Expr(subs[i], absl::StrCat(at, "[", i, "]"), absl::StrCat(name, "-alt", i));
        if (!expr.ok()) return expr.status();
        alternatives.push_back(*std::move(expr));
      }
      if (alternatives.empty()) return Error(at, "no alternative can match");
      return absl::StrJoin(alternatives, " | ");
    }
    if (s.contains("enum") || s.contains("const")) return EnumBody(s, path, assertions);

    auto types = Types(s, path);
    if (!types.ok()) return types.status();
    const bool has_number = std::find(types->begin(), types->end(), "number") != types->end();
    std::vector<std::string> alternatives;
    for (const std::string& type : *types) {
      absl::StatusOr<std::string> expr;
      if (type == "object") {
        expr = ObjectExpr(s, path, name);
      } else if (type == "array") {
        expr = ArrayExpr(s, path, name);
      } else if (type == "string") {
        expr = StringExpr(s, path, name);
      } else if (type == "number") {
        expr = NumberExpr(s, path);
      } else if (type == "integer") {
        if (has_number) continue;  // the numbers include them
        expr = IntegerExpr(s, path);
      } else {
        expr = Use(type);
      }
      if (!expr.ok()) return expr.status();
      alternatives.push_back(*std::move(expr));
    }
    return absl::StrJoin(alternatives, " | ");
  }

  absl::StatusOr<std::vector<std::string>> Types(const Json& s, const std::string& path) {
    if (!s.contains("type")) return TypeNames();
    const Json& type = s["type"];
    std::vector<std::string> names;
    if (type.is_string()) {
      names.push_back(type.get<std::string>());
    } else if (type.is_array() && !type.empty()) {
      for (const Json& t : type) {
        if (!t.is_string()) return Error(path + ".type", "must be a type name or an array of them");
        const std::string n = t.get<std::string>();
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
    } else {
      return Error(path + ".type", "must be a type name or a non-empty array of them");
    }
    for (const std::string& n : names) {
      if (std::find(TypeNames().begin(), TypeNames().end(), n) == TypeNames().end()) {
        return Error(path + ".type", absl::StrCat("unknown type \"", n, "\""));
      }
    }
    return names;
  }

  absl::StatusOr<std::string> EnumBody(const Json& s, const std::string& path,
                                       const std::vector<std::string>& assertions) {
    for (const std::string& key : assertions) {
      if (key != "enum" && key != "const" && key != "type") {
        return Error(absl::StrCat(path, ".", key), "not supported next to enum or const");
      }
    }
    if (s.contains("enum") && s.contains("const")) return Error(path + ".const", "not supported next to enum");
    const std::string at = path + (s.contains("enum") ? ".enum" : ".const");
    std::vector<Json> values;
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return Error(at, "must be a non-empty array");
      for (const Json& v : s["enum"]) values.push_back(v);
    } else {
      values.push_back(s["const"]);
    }
    std::vector<std::string> types = TypeNames();
    if (s.contains("type")) {
      auto declared = Types(s, path);
      if (!declared.ok()) return declared.status();
      types = *std::move(declared);
    }
    std::vector<std::string> literals;
    for (const Json& v : values) {
      const bool typed =
          std::any_of(types.begin(), types.end(), [&](const std::string& t) { return MatchesType(v, t); });
      if (!typed) continue;
      if (!ShallowerThan(v, 64)) return Error(at, "values nested deeper than 64 not supported");
      std::string literal = GbnfQuote(v.dump());
      if (std::find(literals.begin(), literals.end(), literal) == literals.end())
        literals.push_back(std::move(literal));
    }
    if (literals.empty()) return Error(at, "no value has the schema's type");
    return absl::StrJoin(literals, " | ");
  }

  // A non-negative integer keyword, or `fallback` when absent. Counts become GBNF
  // repetitions, which gbnf_parser.cc bounds at 1000.
  absl::StatusOr<int64_t> Count(const Json& s, const std::string& keyword, const std::string& path, int64_t fallback) {
    constexpr int64_t kMaxCount = 1000;
    if (!s.contains(keyword)) return fallback;
    const Json& v = s[keyword];
    const std::string at = absl::StrCat(path, ".", keyword);
    double d = -1;
    if (v.is_number_unsigned() || v.is_number_integer() || v.is_number_float()) d = v.get<double>();
    if (!(d >= 0 && d == std::floor(d))) return Error(at, "must be a non-negative integer");
    if (d > static_cast<double>(kMaxCount))
      return Error(at, absl::StrCat("counts above ", kMaxCount, " not supported"));
    return static_cast<int64_t>(d);
  }

  absl::StatusOr<std::string> StringExpr(const Json& s, const std::string& path, const std::string& name) {
    auto min = Count(s, "minLength", path, 0);
    if (!min.ok()) return min.status();
    auto max = Count(s, "maxLength", path, -1);
    if (!max.ok()) return max.status();
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    const std::string quote = R"("\"")";
    if (s.contains("format")) {
      const std::string at = path + ".format";
      if (!s["format"].is_string()) return Error(at, "must be a string");
      if (s.contains("pattern")) return Error(at, "format together with pattern not supported");
      if (lengths) return Error(at, "format together with minLength/maxLength not supported");
      const std::string format = s["format"].get<std::string>();
      if (format != "date" && format != "time" && format != "date-time" && format != "uuid") {
        return Error(at,
                     absl::StrCat("format \"", format, "\" not supported (supported: date, time, date-time, uuid)"));
      }
      return Seq({quote, Use("format-" + format), quote});
    }
    if (s.contains("pattern")) {
      const std::string at = path + ".pattern";
      if (!s["pattern"].is_string()) return Error(at, "must be a string");
      if (lengths) return Error(at, "pattern together with minLength/maxLength not supported");
      const std::string prefix = ReservePrefix(name + "-pattern");
      auto rules = RegexToJsonStringGbnf(s["pattern"].get<std::string>(), prefix);
      if (!rules.ok()) return Error(at, std::string(rules.status().message()));
      rules_.emplace_back("", *std::move(rules));
      return Seq({quote, prefix, quote});
    }
    if (!lengths) return Use("string");
    if (*max >= 0 && *min > *max) return Error(path + ".minLength", "larger than maxLength");
    Use("char");
    return Seq({quote, Quantify("char", *min, *max), quote});
  }

  // A numeric bound keyword; nullopt when absent or a draft-4 boolean.
  absl::StatusOr<std::optional<double>> Bound(const Json& s, const std::string& keyword, const std::string& path) {
    if (!s.contains(keyword) || s[keyword].is_boolean()) return std::optional<double>();
    const Json& v = s[keyword];
    if (!v.is_number()) return Error(absl::StrCat(path, ".", keyword), "must be a number");
    return std::optional<double>(v.get<double>());
  }

  bool Draft4Exclusive(const Json& s, const std::string& keyword) {
    return s.contains(keyword) && s[keyword].is_boolean() && s[keyword].get<bool>();
  }

  absl::StatusOr<std::string> NumberExpr(const Json& s, const std::string& path) {
    for (const char* upper : {"maximum", "exclusiveMaximum"}) {
      if (s.contains(upper) && !s[upper].is_boolean()) {
        return Error(absl::StrCat(path, ".", upper), "an upper bound on a number not supported (on integers it is)");
      }
    }
    auto minimum = Bound(s, "minimum", path);
    if (!minimum.ok()) return minimum.status();
    auto exclusive = Bound(s, "exclusiveMinimum", path);
    if (!exclusive.ok()) return exclusive.status();
    // The strongest lower bound, and whether it is strict.
    std::optional<double> bound;
    bool strict = false;
    std::string keyword;
    if (*minimum) {
      bound = **minimum;
      strict = Draft4Exclusive(s, "exclusiveMinimum");
      keyword = "minimum";
    }
    if (*exclusive && (!bound || **exclusive >= *bound)) {
      bound = **exclusive;
      strict = true;
      keyword = "exclusiveMinimum";
    }
    if (!bound) return Use("number");
    if (*bound != 0.0) {
      return Error(
          absl::StrCat(path, ".", keyword),
          absl::StrCat("a number bound other than 0 not supported (on integers it is), got ", s[keyword].dump()));
    }
    return Use(strict ? "number-pos" : "number-nonneg");
  }

  absl::StatusOr<std::string> IntegerExpr(const Json& s, const std::string& path) {
    constexpr double kLimit = 1e15;
    std::optional<int64_t> lo, hi;
    const auto raise_lo = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
    const auto lower_hi = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
    for (const char* keyword : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      auto bound = Bound(s, keyword, path);
      if (!bound.ok()) return bound.status();
      if (!*bound) continue;
      const double v = **bound;
      if (!(std::fabs(v) <= kLimit)) {
        return Error(absl::StrCat(path, ".", keyword), "bounds beyond 1e15 in magnitude not supported");
      }
      const std::string k = keyword;
      if (k == "minimum") {
        raise_lo(Draft4Exclusive(s, "exclusiveMinimum") ? static_cast<int64_t>(std::floor(v)) + 1
                                                        : static_cast<int64_t>(std::ceil(v)));
      } else if (k == "exclusiveMinimum") {
        raise_lo(static_cast<int64_t>(std::floor(v)) + 1);
      } else if (k == "maximum") {
        lower_hi(Draft4Exclusive(s, "exclusiveMaximum") ? static_cast<int64_t>(std::ceil(v)) - 1
                                                        : static_cast<int64_t>(std::floor(v)));
      } else {
        lower_hi(static_cast<int64_t>(std::ceil(v)) - 1);
      }
    }
    if (!lo && !hi) return Use("integer");
    if (lo && hi && *lo > *hi) {
      return Error(path + (s.contains("maximum") ? ".maximum" : ".exclusiveMaximum"),
                   "no integer lies between the lower and upper bounds");
    }
    if (lo && *lo == 0 && !hi) return Use("uint");
    return IntegerRange(lo, hi);
  }

  absl::StatusOr<std::string> ArrayExpr(const Json& s, const std::string& path, const std::string& name) {
    auto min = Count(s, "minItems", path, 0);
    if (!min.ok()) return min.status();
    auto max = Count(s, "maxItems", path, -1);
    if (!max.ok()) return max.status();
    if (s.contains("uniqueItems")) {
      if (!s["uniqueItems"].is_boolean()) return Error(path + ".uniqueItems", "must be a boolean");
      if (s["uniqueItems"].get<bool>()) return Error(path + ".uniqueItems", "true not supported");
    }
    // The tuple part and the schema of the items after it.
    const Json* prefix = nullptr;
    std::string prefix_at, rest_at;
    Json rest = true;
    if (s.contains("prefixItems")) {
      prefix = &s["prefixItems"], prefix_at = path + ".prefixItems";
      if (s.contains("items") && s["items"].is_array()) return Error(path + ".items", "an array next to prefixItems");
      if (s.contains("items")) rest = s["items"], rest_at = path + ".items";
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix = &s["items"], prefix_at = path + ".items";
      if (s.contains("additionalItems")) rest = s["additionalItems"], rest_at = path + ".additionalItems";
    } else if (s.contains("items")) {
      rest = s["items"], rest_at = path + ".items";
    }
    if (prefix != nullptr && !prefix->is_array()) return Error(prefix_at, "must be an array of schemas");
    if (prefix == nullptr && rest == Json(true) && *min == 0 && *max < 0) return Use("array");

    GuardScope guard(this);
    int64_t limit = *max;  // -1: unbounded
    const auto cap = [&](int64_t n) { limit = limit < 0 ? n : std::min(limit, n); };
    std::vector<std::string> tuple;
    if (prefix != nullptr) {
      for (size_t j = 0; j < prefix->size(); ++j) {
        const Json& sub = (*prefix)[j];
        if (sub.is_boolean() && !sub.get<bool>()) {
          cap(static_cast<int64_t>(j));
          break;
        }
        if (limit >= 0 && static_cast<int64_t>(j) >= limit) break;
        auto expr = Expr(sub, absl::StrCat(prefix_at, "[", j, "]"), absl::StrCat(name, "-item", j));
        if (!expr.ok()) return expr.status();
        tuple.push_back(*std::move(expr));
      }
    }
    const int64_t k = static_cast<int64_t>(tuple.size());
    if (rest.is_boolean() && !rest.get<bool>()) cap(k);
    if (limit >= 0 && *min > limit) {
      return Error(path + ".minItems", "more items required than the schema allows");
    }
    if (limit == 0) return Seq({R"("[")", Use("ws"), R"("]")"});
    std::string rest_expr;
    if (limit < 0 || limit > k) {
      auto expr = Expr(rest, rest_at.empty() ? path + ".items" : rest_at, name + "-item");
      if (!expr.ok()) return expr.status();
      rest_expr = *std::move(expr);
    }
    Use("ws");
    const auto element = [&](int64_t j) { return j < k ? tuple[static_cast<size_t>(j)] : rest_expr; };
    // The items from index j on, each after a comma.
    std::function<std::string(int64_t)> after = [&](int64_t j) -> std::string {
      if (limit >= 0 && j >= limit) return "";
      if (j < k) {
        const std::string piece = Seq({Sep() + element(j), after(j + 1)});
        return j < *min ? piece : "( " + piece + " )?";
      }
      return Quantify("( " + Sep() + rest_expr + " )", std::max<int64_t>(*min - j, 0), limit < 0 ? -1 : limit - j);
    };
    const std::string items = Seq({element(0), after(1)});
    if (*min >= 1) return Seq({R"("[" ws)", items, R"(ws "]")"});
    return Seq({R"("[" ws ()", items, R"(ws )? "]")"});
  }

  // An object schema's "required": the names in order, each once.
  static absl::StatusOr<std::vector<std::string>> RequiredNames(const Json& s, const std::string& path) {
    std::vector<std::string> required;
    if (!s.contains("required")) return required;
    const Json& r = s["required"];
    if (!r.is_array()) return Error(path + ".required", "must be an array of names");
    for (const Json& n : r) {
      if (!n.is_string()) return Error(path + ".required", "must be an array of names");
      if (std::find(required.begin(), required.end(), n.get<std::string>()) == required.end()) {
        required.push_back(n.get<std::string>());
      }
    }
    return required;
  }

  struct ObjectMember {
    std::string text;  // "key" ws ":" ws value
    bool required;
  };

  static std::string MemberText(const std::string& key, const std::string& value) {
    return Seq({GbnfQuote(Json(key).dump()), R"(ws ":" ws)", value});
  }

  // One member per property whose schema is not false, in the schema's order.
  absl::Status PropertyMembers(const Json& props, const std::vector<std::string>& required, const std::string& path,
                               const std::string& name, std::vector<ObjectMember>* members) {
    for (const auto& [key, sub] : props.items()) {
      const bool req = std::find(required.begin(), required.end(), key) != required.end();
      const std::string at = absl::StrCat(path, ".properties.", key);
      if (sub.is_boolean() && !sub.get<bool>()) {
        if (req) return Error(at, "required but its schema is false");
        continue;
      }
      auto expr = Expr(sub, at, absl::StrCat(name, "-", key));
      if (!expr.ok()) return expr.status();
      members->push_back({MemberText(key, *expr), req});
    }
    return absl::OkStatus();
  }

  // The rule for further members' keys: any string but the listed names (those of false
  // properties included), so that a listed property cannot come again with another value.
  absl::StatusOr<std::string> FurtherMemberKey(const Json& props, const std::vector<std::string>& required, bool open,
                                               const std::string& name) {
    std::vector<std::string> listed;
    for (const auto& [k, unused] : props.items()) listed.push_back(k);
    for (const std::string& k : required) {
      if (!props.contains(k)) listed.push_back(k);
    }
    std::string key = "string";
    if (open && !listed.empty()) {
      key = ReservePrefix(name + "-key");
      auto rules = JsonStringExceptGbnf(listed, key);
      if (!rules.ok()) return rules.status();
      rules_.emplace_back("", *std::move(rules));
    } else if (open) {
      Use("string");
    }
    return key;
  }

  // The object's members in order, optional ones skippable, then `additional_tail`.
  // The first member is property i (every property before it optional and left out),
  // or, when nothing is required, a further member. After member i come properties
  // i+1.. (a comma before each) and then the further members: tail[i+1].
  std::string MemberSequence(const std::vector<ObjectMember>& members, const std::string& additional_member,
                             const std::string& additional_tail, bool open, const std::string& name) {
    const size_t n = members.size();
    size_t first_required = n;
    for (size_t i = 0; i < n; ++i) {
      if (members[i].required) {
        first_required = i;
        break;
      }
    }
    const size_t last_first = std::min(first_required, n == 0 ? 0 : n - 1);  // last property that may come first
    const size_t alternatives_count = (n == 0 ? 0 : last_first + 1) + (first_required == n && open ? 1 : 0);
    std::vector<std::string> tail(n + 1);
    tail[n] = additional_tail;
    for (size_t i = n; i-- > 1;) {
      const std::string piece = members[i].required ? Sep() + members[i].text : "( " + Sep() + members[i].text + " )?";
      std::string text = Seq({piece, tail[i + 1]});
      // A tail several first members share becomes a rule of its own.
      if (alternatives_count > 1 && i <= last_first) {
        const std::string rule = Reserve(absl::StrCat(name, "-rest", i));
        rules_.emplace_back(rule, std::move(text));
        text = rule;
      }
      tail[i] = std::move(text);
    }
    std::vector<std::string> firsts;
    if (n > 0) {
      for (size_t i = 0; i <= last_first; ++i) firsts.push_back(Seq({members[i].text, tail[i + 1]}));
    }
    if (first_required == n && open) firsts.push_back(Seq({additional_member, additional_tail}));
    if (firsts.empty()) return std::string(R"("{" ws "}")");
    const std::string first = Group(absl::StrJoin(firsts, " | "));
    if (first_required < n) return Seq({R"("{" ws)", first, R"(ws "}")"});
    return Seq({R"("{" ws ()", first, R"(ws )? "}")"});
  }

  absl::StatusOr<std::string> ObjectExpr(const Json& s, const std::string& path, const std::string& name) {
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) return Error(path + ".properties", "must be an object");
    auto required_names = RequiredNames(s, path);
    if (!required_names.ok()) return required_names.status();
    const std::vector<std::string> required = *std::move(required_names);
    const Json additional = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    if (!additional.is_boolean() && !additional.is_object()) {
      return Error(path + ".additionalProperties", "must be a boolean or a schema");
    }
    const bool open = !(additional.is_boolean() && !additional.get<bool>());
    if (props.empty() && required.empty() && additional == Json(true)) return Use("object");

    GuardScope guard(this);
    std::vector<ObjectMember> members;
    if (absl::Status status = PropertyMembers(props, required, path, name, &members); !status.ok()) return status;
    std::string additional_value;  // the value of a further member
    if (open) {
      auto expr = Expr(additional, path + ".additionalProperties", name + "-additional");
      if (!expr.ok()) return expr.status();
      additional_value = *std::move(expr);
    }
    for (const std::string& key : required) {
      if (props.contains(key)) continue;
      if (!open) {
        return Error(path + ".required",
                     absl::StrCat("\"", key, "\" is required, not in properties, and additionalProperties is false"));
      }
      members.push_back({MemberText(key, additional_value), true});
    }
    Use("ws");
    auto key = FurtherMemberKey(props, required, open, name);
    if (!key.ok()) return key.status();
    const std::string additional_member = open ? Seq({*key, R"(ws ":" ws)", additional_value}) : "";
    const std::string additional_tail = open ? "( " + Sep() + additional_member + " )*" : "";
    return MemberSequence(members, additional_member, additional_tail, open, name);
  }

  Json root_;
  std::vector<std::pair<std::string, std::string>> rules_;  // name "" = raw rules text
  std::set<std::string> used_names_;
  std::vector<std::string> prefixes_;  // names whose "<name>-..." rules regex_grammar.cc defines
  std::set<std::string> used_shared_;
  std::map<std::string, std::string> refs_;  // "$ref" -> rule
  std::set<std::string> unguarded_;          // references being expanded since the last bracket
  int depth_ = 0;                            // Body calls on the stack
};

}  // namespace

absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema_json, std::string_view root_name) {
  return Converter().Run(schema_json, std::string(root_name));
}

std::string JsonObjectGbnf() { return "root ::= object\n" + SharedRulesText({"object"}); }

}  // namespace crossreg::grammar

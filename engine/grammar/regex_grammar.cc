#include "engine/grammar/regex_grammar.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/grammar.h"

namespace crossreg::grammar {
namespace {

// Code point sets as sorted, disjoint, non-adjacent closed ranges.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 1000;
constexpr int kMaxNesting = 200;  // groups inside groups: the parser recurses per level

Ranges Normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges Complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges Union(Ranges a, const Ranges& b) {
  a.insert(a.end(), b.begin(), b.end());
  return Normalized(std::move(a));
}

Ranges Intersect(const Ranges& a, const Ranges& b) { return Complement(Union(Complement(a), Complement(b))); }
Ranges Subtract(const Ranges& a, const Ranges& b) { return Intersect(a, Complement(b)); }

bool Contains(const Ranges& r, uint32_t cp) {
  for (const auto& [lo, hi] : r) {
    if (cp >= lo && cp <= hi) return true;
  }
  return false;
}

bool IsSingle(const Ranges& r) { return r.size() == 1 && r[0].first == r[0].second; }

const Ranges& DigitSet() {
  static const Ranges* set = new Ranges{{'0', '9'}};
  return *set;
}
const Ranges& WordSet() {
  static const Ranges* set = new Ranges{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return *set;
}
// ECMAScript's WhiteSpace and LineTerminator.
const Ranges& SpaceSet() {
  static const Ranges* set = new Ranges(Normalized({{0x09, 0x0D},
                                                    {0x20, 0x20},
                                                    {0xA0, 0xA0},
                                                    {0x1680, 0x1680},
                                                    {0x2000, 0x200A},
                                                    {0x2028, 0x2029},
                                                    {0x202F, 0x202F},
                                                    {0x205F, 0x205F},
                                                    {0x3000, 0x3000},
                                                    {0xFEFF, 0xFEFF}}));
  return *set;
}
const Ranges& DotSet() {
  static const Ranges* set = new Ranges(Complement({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}}));
  return *set;
}
const Ranges& AnySet() {
  static const Ranges* set = new Ranges{{0, kMaxCodePoint}};
  return *set;
}


// Decodes the UTF-8 character at text[*pos] and advances; nullopt (pos unchanged) if
// the bytes there are not UTF-8 (overlong forms and surrogates included).
std::optional<uint32_t> DecodeUtf8(std::string_view text, size_t* pos) {
  const size_t i = *pos;
  if (i >= text.size()) return std::nullopt;
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t b0 = byte(0);
  int len = 0;
  uint32_t cp = 0;
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07;
  } else {
    return std::nullopt;
  }
  if (i + static_cast<size_t>(len) > text.size()) return std::nullopt;
  for (int k = 1; k < len; ++k) {
    if ((byte(static_cast<size_t>(k)) & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (byte(static_cast<size_t>(k)) & 0x3F);
  }
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  *pos = i + static_cast<size_t>(len);
  return cp;
}

// A code point inside a GBNF literal or class: printable ASCII as itself unless
// `special` lists it, everything else as an escape.
std::string EscapeCodePoint(uint32_t cp, std::string_view special) {
  if (cp >= 0x20 && cp < 0x7F && special.find(static_cast<char>(cp)) == std::string_view::npos) {
    return std::string(1, static_cast<char>(cp));
  }
  if (cp < 0x80) return absl::StrFormat("\\x%02X", cp);
  if (cp <= 0xFFFF) return absl::StrFormat("\\u%04X", cp);
  return absl::StrFormat("\\U%08X", cp);
}

std::string QuoteCodePoints(const std::vector<uint32_t>& cps) {
  std::string out = "\"";
  for (uint32_t cp : cps) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += EscapeCodePoint(cp, "");
        break;
    }
  }
  return out + "\"";
}

// `[...]` for a set of two or more code points; the negated form when the set reaches
// the top of the code space (".", [^a]) so that it stays short.
std::string ClassText(const Ranges& set) {
  constexpr std::string_view kSpecial = "[]\\^-\"";
  const bool negate = !set.empty() && set.back().second == kMaxCodePoint;
  const Ranges shown = negate ? Complement(set) : set;
  std::string out = negate ? "[^" : "[";
  for (const auto& [lo, hi] : shown) {
    out += EscapeCodePoint(lo, kSpecial);
    if (hi != lo) absl::StrAppend(&out, hi == lo + 1 ? "" : "-", EscapeCodePoint(hi, kSpecial));
  }
  return out + "]";
}

// ---------------------------------------------------------------------------------------
// The pattern as a tree.

struct Node {
  enum class Kind : uint8_t {
    kEmpty,   // the empty string
    kChars,   // one character of `chars`
    kConcat,  // children in order
    kAlt,     // any child; no children = matches nothing
    kRepeat,  // children[0] between min and max times (max -1: unbounded)
    kRef,     // the rule `ref` (matches one character or more)
  };
  Kind kind = Kind::kEmpty;
  Ranges chars;
  std::vector<Node> children;
  int min = 0, max = -1;
  std::string ref;
};

Node Empty() { return Node{}; }
Node WithKind(Node::Kind kind) {
  Node n;
  n.kind = kind;
  return n;
}
Node Never() { return WithKind(Node::Kind::kAlt); }
Node Chars(Ranges r) {
  Node n = WithKind(Node::Kind::kChars);
  n.chars = std::move(r);
  return n;
}
Node Concat(std::vector<Node> parts) {
  Node n = WithKind(Node::Kind::kConcat);
  n.children = std::move(parts);
  return n;
}
Node Alt(std::vector<Node> parts) {
  Node n = WithKind(Node::Kind::kAlt);
  n.children = std::move(parts);
  return n;
}
Node Repeat(Node body, int min, int max) {
  Node n = WithKind(Node::Kind::kRepeat);
  n.min = min;
  n.max = max;
  n.children.push_back(std::move(body));
  return n;
}
Node RuleRef(std::string name) {
  Node n = WithKind(Node::Kind::kRef);
  n.ref = std::move(name);
  return n;
}
bool IsNever(const Node& n) { return n.kind == Node::Kind::kAlt && n.children.empty(); }

bool Nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kEmpty:
      return true;
    case Node::Kind::kChars:
    case Node::Kind::kRef:
      return false;
    case Node::Kind::kConcat:
      return std::all_of(n.children.begin(), n.children.end(), [](const Node& c) { return Nullable(c); });
    case Node::Kind::kAlt:
      return std::any_of(n.children.begin(), n.children.end(), [](const Node& c) { return Nullable(c); });
    case Node::Kind::kRepeat:
      return n.min == 0 || Nullable(n.children[0]);
  }
  return false;
}

Node Simplify(Node n);

// A non-nullable node whose repetitions match what `n`'s do (B* = n*), or nullopt when
// n* matches only "". An unbounded repetition of a nullable body gets this body instead,
// so that expanding it into rules never recurses without consuming a character. Linear:
// under a star a concatenation of nullable parts repeats like their alternation (each
// part is one of its words, and each of its words is a run of parts), and x{m,n} that
// can be empty repeats like x.
std::optional<Node> StarBody(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kEmpty:
      return std::nullopt;
    case Node::Kind::kChars:
    case Node::Kind::kRef:
      return n;
    case Node::Kind::kConcat:
    case Node::Kind::kAlt: {
      if (!Nullable(n)) return n;  // a concatenation with a part that is never empty
      std::vector<Node> parts;
      for (const Node& c : n.children) {
        if (auto body = StarBody(c)) parts.push_back(*std::move(body));
      }
      if (parts.empty()) return std::nullopt;
      return Simplify(Alt(std::move(parts)));
    }
    case Node::Kind::kRepeat:
      if (!Nullable(n)) return n;
      return StarBody(n.children[0]);
  }
  return std::nullopt;
}

// Flattens, drops what matches nothing or only "", and makes every unbounded
// repetition's body non-nullable (StarBody).
Node Simplify(Node n) {
  switch (n.kind) {
    case Node::Kind::kEmpty:
    case Node::Kind::kRef:
      return n;
    case Node::Kind::kChars:
      return n.chars.empty() ? Never() : n;
    case Node::Kind::kConcat: {
      std::vector<Node> parts;
      for (Node& c : n.children) {
        Node s = Simplify(std::move(c));
        if (IsNever(s)) return Never();
        if (s.kind == Node::Kind::kEmpty) continue;
        if (s.kind == Node::Kind::kConcat) {
          for (Node& g : s.children) parts.push_back(std::move(g));
        } else {
          parts.push_back(std::move(s));
        }
      }
      if (parts.empty()) return Empty();
      if (parts.size() == 1) return std::move(parts[0]);
      return Concat(std::move(parts));
    }
    case Node::Kind::kAlt: {
      if (n.children.empty()) return n;
      std::vector<Node> parts;
      bool has_empty = false;
      for (Node& c : n.children) {
        Node s = Simplify(std::move(c));
        if (IsNever(s)) continue;
        if (s.kind == Node::Kind::kEmpty) {
          has_empty = true;
        } else if (s.kind == Node::Kind::kAlt) {
          for (Node& g : s.children) parts.push_back(std::move(g));
        } else {
          parts.push_back(std::move(s));
        }
      }
      if (parts.empty()) return has_empty ? Empty() : Never();
      Node alt = parts.size() == 1 ? std::move(parts[0]) : Alt(std::move(parts));
      if (!has_empty || Nullable(alt)) return alt;
      return Repeat(std::move(alt), 0, 1);
    }
    case Node::Kind::kRepeat: {
      Node body = Simplify(std::move(n.children[0]));
      if (IsNever(body)) return n.min == 0 ? Empty() : Never();
      if (body.kind == Node::Kind::kEmpty || n.max == 0) return Empty();
      if (n.min == 1 && n.max == 1) return body;
      if (n.max < 0 && Nullable(body)) {
        auto star_body = StarBody(body);
        if (!star_body) return Empty();
        return Repeat(*std::move(star_body), 0, -1);
      }
      return Repeat(std::move(body), n.min, n.max);
    }
  }
  return n;
}

// ---------------------------------------------------------------------------------------
// Parsing.

struct TopAlternative {
  Node node;
  bool anchored_start = false;
  bool anchored_end = false;
};

// One item of a class or an escape: a set, and the code point when it is a single one
// (only those may bound a range).
struct ClassItem {
  Ranges set;
  bool single = false;
  uint32_t cp = 0;
};

ClassItem SingleItem(uint32_t cp) {
  ClassItem item;
  item.set = {{cp, cp}};
  item.single = true;
  item.cp = cp;
  return item;
}
ClassItem SetItem(Ranges set) {
  ClassItem item;
  item.set = std::move(set);
  return item;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : p_(pattern) {}

  absl::StatusOr<std::vector<TopAlternative>> ParseTop() {
    std::vector<TopAlternative> alternatives;
    while (true) {
      TopAlternative alt;
      auto seq = ParseSequence(&alt);
      if (!seq.ok()) return seq.status();
      alt.node = *std::move(seq);
      alternatives.push_back(std::move(alt));
      if (AtEnd()) break;
      if (Peek() == '|') {
        ++pos_;
        continue;
      }
      return Error(pos_, "unmatched ')'");
    }
    return alternatives;
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }
  bool LookingAt(std::string_view s) const { return p_.substr(pos_, s.size()) == s; }
  static absl::Status Error(size_t offset, std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("regex: ", offset, ": ", std::string(what)));
  }
  static absl::Status Unsupported(size_t offset, std::string_view construct) {
    return Error(offset, absl::StrCat(std::string(construct), " not supported"));
  }

  // Alternatives up to a ')' (not consumed) or the end.
  absl::StatusOr<Node> ParseAlternation() {
    std::vector<Node> alternatives;
    while (true) {
      auto seq = ParseSequence(nullptr);
      if (!seq.ok()) return seq.status();
      alternatives.push_back(*std::move(seq));
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
    }
    return alternatives.size() == 1 ? std::move(alternatives[0]) : Alt(std::move(alternatives));
  }

  // A concatenation up to '|', ')' or the end. `top` (outside every group) is where the
  // anchors may stand: ^ first, $ last.
  absl::StatusOr<Node> ParseSequence(TopAlternative* top) {
    std::vector<Node> parts;
    if (top != nullptr && Peek() == '^' && !AtEnd()) {
      top->anchored_start = true;
      ++pos_;
    }
    while (!AtEnd()) {
      const char c = Peek();
      if (c == '|' || c == ')') break;
      if (c == '$') {
        if (top != nullptr && (pos_ + 1 == p_.size() || p_[pos_ + 1] == '|')) {
          top->anchored_end = true;
          ++pos_;
          break;
        }
        return Unsupported(pos_, "anchor $ other than at the end of the pattern");
      }
      if (c == '^') return Unsupported(pos_, "anchor ^ other than at the start of the pattern");
      auto atom = ParseAtom();
      if (!atom.ok()) return atom.status();
      auto quantified = ParseQuantifiers(*std::move(atom));
      if (!quantified.ok()) return quantified.status();
      parts.push_back(*std::move(quantified));
    }
    return Concat(std::move(parts));
  }

  absl::StatusOr<Node> ParseAtom() {
    const size_t start = pos_;
    switch (Peek()) {
      case '(':
        return ParseGroup();
      case '[': {
        auto set = ParseClass();
        if (!set.ok()) return set.status();
        return Chars(*std::move(set));
      }
      case '.':
        ++pos_;
        return Chars(DotSet());
      case '\\': {
        auto item = ParseEscape(/*in_class=*/false);
        if (!item.ok()) return item.status();
        return Chars(std::move(item->set));
      }
      case '*':
      case '+':
      case '?':
        return Error(start, absl::StrCat("quantifier '", std::string(1, Peek()), "' with nothing to repeat"));
      case '{':
        if (ParseBraces().has_value()) return Error(start, "quantifier '{' with nothing to repeat");
        return Error(start, "'{' that does not start a quantifier {m}, {m,} or {m,n} (escape it as \\{)");
      default: {
        auto cp = NextCodePoint();
        if (!cp.ok()) return cp.status();
        return Chars({{*cp, *cp}});
      }
    }
  }

  absl::StatusOr<uint32_t> NextCodePoint() {
    const size_t start = pos_;
    auto cp = DecodeUtf8(p_, &pos_);
    if (!cp) return Error(start, "invalid UTF-8");
    return *cp;
  }

  absl::StatusOr<Node> ParseGroup() {
    const size_t start = pos_;
    if (LookingAt("(?:")) {
      pos_ += 3;
    } else if (LookingAt("(?=")) {
      return Unsupported(start, "lookahead (?=");
    } else if (LookingAt("(?!")) {
      return Unsupported(start, "negative lookahead (?!");
    } else if (LookingAt("(?<=")) {
      return Unsupported(start, "lookbehind (?<=");
    } else if (LookingAt("(?<!")) {
      return Unsupported(start, "negative lookbehind (?<!");
    } else if (LookingAt("(?P=")) {
      return Unsupported(start, "backreference (?P=name)");
    } else if (LookingAt("(?P>") || LookingAt("(?&") || LookingAt("(?R)")) {
      return Unsupported(start, "recursion or subroutine call");
    } else if (LookingAt("(?>")) {
      return Unsupported(start, "atomic group (?>");
    } else if (LookingAt("(?#")) {
      return Unsupported(start, "comment group (?#");
    } else if (LookingAt("(?<") || LookingAt("(?P<")) {
      pos_ += LookingAt("(?<") ? 3 : 4;
      const size_t name_start = pos_;
      while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_')) ++pos_;
      if (pos_ == name_start || Peek() != '>') return Error(start, "malformed group name");
      ++pos_;
    } else if (LookingAt("(?")) {
      const char c = Peek(2);
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '-' || c == '^') {
        return Unsupported(start, "inline flags (?flags)");
      }
      return Unsupported(start, "group syntax (?" + std::string(c == '\0' ? "" : std::string(1, c)));
    } else {
      ++pos_;
    }
    if (++depth_ > kMaxNesting) return Error(start, "groups nested deeper than 200");
    auto body = ParseAlternation();
    if (!body.ok()) return body.status();
    if (AtEnd() || Peek() != ')') return Error(start, "unterminated group");
    ++pos_;
    --depth_;
    return body;
  }

  // {m}, {m,} or {m,n} at pos_: the bounds (max -1: unbounded) and pos_ past it, or
  // nullopt and pos_ unchanged.
  std::optional<std::pair<int, int>> ParseBraces() {
    size_t i = pos_;
    if (i >= p_.size() || p_[i] != '{') return std::nullopt;
    ++i;
    const auto number = [&](int* value) {
      const size_t begin = i;
      long long v = 0;
      while (i < p_.size() && std::isdigit(static_cast<unsigned char>(p_[i]))) {
        v = std::min<long long>(v * 10 + (p_[i] - '0'), 1'000'000'000);
        ++i;
      }
      *value = static_cast<int>(v);
      return i > begin;
    };
    int min = 0, max = 0;
    if (!number(&min)) return std::nullopt;
    if (i < p_.size() && p_[i] == '}') {
      max = min;
    } else if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(&max)) max = -1;
      if (i >= p_.size() || p_[i] != '}') return std::nullopt;
    } else {
      return std::nullopt;
    }
    pos_ = i + 1;
    return std::make_pair(min, max);
  }

  absl::StatusOr<Node> ParseQuantifiers(Node atom) {
    const size_t start = pos_;
    int min = 0, max = 0;
    switch (Peek()) {
      case '*':
        min = 0, max = -1, ++pos_;
        break;
      case '+':
        min = 1, max = -1, ++pos_;
        break;
      case '?':
        min = 0, max = 1, ++pos_;
        break;
      case '{': {
        auto braces = ParseBraces();
        if (!braces) return Error(start, "'{' that does not start a quantifier {m}, {m,} or {m,n} (escape it as \\{)");
        std::tie(min, max) = *braces;
        if (min > kMaxRepeat || max > kMaxRepeat) return Unsupported(start, "repetition count above 1000");
        if (max >= 0 && min > max) return Error(start, "quantifier {m,n} with m > n");
        break;
      }
      default:
        return atom;
    }
    if (AtEnd()) return Repeat(std::move(atom), min, max);
    if (Peek() == '?') ++pos_;  // lazy: the same strings
    if (Peek() == '+' && !AtEnd()) return Unsupported(pos_, "possessive quantifier");
    const size_t next = pos_;
    if (!AtEnd() && (Peek() == '*' || Peek() == '+' || Peek() == '?' || (Peek() == '{' && ParseBraces()))) {
      return Error(next, "quantifier with nothing to repeat");
    }
    return Repeat(std::move(atom), min, max);
  }

  absl::StatusOr<Ranges> ParseClass() {
    const size_t start = pos_;
    ++pos_;  // '['
    bool negated = false;
    if (Peek() == '^' && !AtEnd()) {
      negated = true;
      ++pos_;
    }
    if (Peek() == ']' && !AtEnd()) {
      ++pos_;
      if (negated) return AnySet();  // [^]: ECMAScript's any character
      return Unsupported(start, "the empty class [] (it matches nothing)");
    }
    Ranges set;
    while (true) {
      if (AtEnd()) return Error(start, "unterminated character class");
      if (Peek() == ']') {
        ++pos_;
        break;
      }
      auto first = ParseClassItem();
      if (!first.ok()) return first.status();
      if (Peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        const size_t dash = pos_;
        ++pos_;
        auto last = ParseClassItem();
        if (!last.ok()) return last.status();
        if (first->single && last->single) {
          if (first->cp > last->cp) return Error(dash, "character class range out of order");
          set.emplace_back(first->cp, last->cp);
        } else {
          // [\d-z]: ECMAScript (Annex B) reads the '-' as itself.
          set = Union(Union(std::move(set), first->set), Union({{'-', '-'}}, last->set));
        }
      } else {
        set = Union(std::move(set), first->set);
      }
    }
    set = Normalized(std::move(set));
    return negated ? Complement(set) : set;
  }

  absl::StatusOr<ClassItem> ParseClassItem() {
    if (Peek() == '\\') return ParseEscape(/*in_class=*/true);
    auto cp = NextCodePoint();
    if (!cp.ok()) return cp.status();
    return SingleItem(*cp);
  }

  // Exactly `digits` hex digits at pos_ (consumed), or -1.
  long ReadHex(int digits) {
    long value = 0;
    for (int k = 0; k < digits; ++k) {
      const int h = HexValue(Peek());
      if (h < 0 || AtEnd()) return -1;
      value = value * 16 + h;
      ++pos_;
    }
    return value;
  }

  // The class that \d, \D, \w, \W, \s or \S stands for, or nullopt for another letter.
  static std::optional<Ranges> ShorthandClass(char c) {
    switch (c) {
      case 'd':
        return DigitSet();
      case 'D':
        return Complement(DigitSet());
      case 'w':
        return WordSet();
      case 'W':
        return Complement(WordSet());
      case 's':
        return SpaceSet();
      case 'S':
        return Complement(SpaceSet());
      default:
        return std::nullopt;
    }
  }

  // The character that \n, \t, \r, \f or \v stands for, or -1 for another letter.
  static int ControlCharacter(char c) {
    switch (c) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      default:
        return -1;
    }
  }

  // For the error: what a refused letter or digit escape means in the regex dialects
  // schemas are written for. Null for punctuation, which stands for itself.
  static const char* UnsupportedEscape(char c) {
    switch (c) {
      case 'b':
      case 'B':
        return "word boundary";
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        return "anchor";
      case 'k':
        return "named backreference";
      case 'p':
      case 'P':
        return "Unicode property escape";
      default:
        break;
    }
    if (c >= '1' && c <= '9') return "backreference";
    if (std::isalnum(static_cast<unsigned char>(c))) return "unknown escape";
    return nullptr;
  }

  // \uXXXX (a surrogate pair of them makes one code point) or \u{X...}, pos_ after the u.
  absl::StatusOr<ClassItem> ParseUnicodeEscape(size_t start) {
    if (Peek() == '{') {
      ++pos_;
      long v = 0;
      int digits = 0;
      while (!AtEnd() && HexValue(Peek()) >= 0 && digits < 7) {
        v = v * 16 + HexValue(Peek());
        ++pos_, ++digits;
      }
      if (digits == 0 || Peek() != '}' || v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
        return Error(start, "malformed \\u{...} escape");
      }
      ++pos_;
      return SingleItem(static_cast<uint32_t>(v));
    }
    long v = ReadHex(4);
    if (v < 0) return Error(start, "\\u needs four hex digits");
    if (v >= 0xD800 && v <= 0xDBFF && LookingAt("\\u")) {
      const size_t save = pos_;
      pos_ += 2;
      const long low = ReadHex(4);
      if (low >= 0xDC00 && low <= 0xDFFF)
        return SingleItem(static_cast<uint32_t>(0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)));
      pos_ = save;
    }
    if (v >= 0xD800 && v <= 0xDFFF) return Unsupported(start, "lone surrogate \\u escape");
    return SingleItem(static_cast<uint32_t>(v));
  }

  absl::StatusOr<ClassItem> ParseEscape(bool in_class) {
    const size_t start = pos_;
    ++pos_;  // '\'
    if (AtEnd()) return Error(start, "trailing backslash");
    const char c = Peek();
    if (std::optional<Ranges> set = ShorthandClass(c); set.has_value()) {
      ++pos_;
      return SetItem(*std::move(set));
    }
    if (const int control = ControlCharacter(c); control >= 0) {
      ++pos_;
      return SingleItem(static_cast<uint32_t>(control));
    }
    switch (c) {
      case '0':
        ++pos_;
        if (std::isdigit(static_cast<unsigned char>(Peek()))) return Unsupported(start, "octal escape \\0N");
        return SingleItem(0);
      case 'b':
        if (in_class) {
          ++pos_;
          return SingleItem(0x08);
        }
        break;  // outside a class it is a word boundary, refused below
      case 'c': {
        const char letter = Peek(1);
        if (!std::isalpha(static_cast<unsigned char>(letter))) return Error(start, "\\c must be followed by a letter");
        pos_ += 2;
        return SingleItem(static_cast<uint32_t>(letter) % 32);
      }
      case 'x': {
        ++pos_;
        const long v = ReadHex(2);
        if (v < 0) return Error(start, "\\x needs two hex digits");
        return SingleItem(static_cast<uint32_t>(v));
      }
      case 'u':
        ++pos_;
        return ParseUnicodeEscape(start);
      default:
        break;
    }
    if (const char* construct = UnsupportedEscape(c); construct != nullptr) {
      return Unsupported(start, absl::StrCat(construct, " \\", std::string(1, c)));
    }
    // A backslash before punctuation (or any other character) is that character.
    auto cp = NextCodePoint();
    if (!cp.ok()) return cp.status();
    return SingleItem(*cp);
  }

  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------------------
// Emitting GBNF.

// The canonical JSON spelling of one code point inside a string literal.
std::string JsonSpelling(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case 0x08:
      return "\\b";
    case 0x0C:
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (cp < 0x20) return absl::StrFormat("\\u%04x", cp);
  std::string out;
  AppendUtf8(cp, out);
  return out;
}

std::vector<uint32_t> CodePointsOf(std::string_view utf8) {
  std::vector<uint32_t> out;
  size_t pos = 0;
  while (pos < utf8.size()) {
    auto cp = DecodeUtf8(utf8, &pos);
    if (!cp) {
      // Not UTF-8: the byte stands for itself (Latin-1), so nothing is dropped silently.
      out.push_back(static_cast<uint8_t>(utf8[pos]));
      ++pos;
    } else {
      out.push_back(*cp);
    }
  }
  return out;
}

class Emitter {
 public:
  explicit Emitter(bool json) : json_(json) {}

  // Precedence of the place the text goes: 0 an alternative, 1 an element of a
  // sequence, 2 the operand of a quantifier.
  std::string Emit(const Node& n, int prec) {
    switch (n.kind) {
      case Node::Kind::kEmpty:
        return "\"\"";
      case Node::Kind::kRef:
        return n.ref;
      case Node::Kind::kChars: {
        const CharsText chars = TextFor(n.chars);
        const bool parenthesize = (prec == 1 && chars.alternation) || (prec == 2 && !chars.element);
        return parenthesize ? "( " + chars.text + " )" : chars.text;
      }
      case Node::Kind::kConcat: {
        std::vector<std::string> parts;
        std::vector<uint32_t> run;  // single characters, merged into one literal
        const auto flush = [&]() {
          if (run.empty()) return;
          parts.push_back(Literal(run));
          run.clear();
        };
        for (const Node& c : n.children) {
          if (c.kind == Node::Kind::kChars && IsSingle(c.chars)) {
            run.push_back(c.chars[0].first);
            continue;
          }
          flush();
          parts.push_back(Emit(c, 1));
        }
        flush();
        // A quantifier applies to one element: "ab"* is not (ab)* in every reader.
        const std::string text = absl::StrJoin(parts, " ");
        return prec == 2 ? "( " + text + " )" : text;
      }
      case Node::Kind::kAlt: {
        std::vector<std::string> parts;
        for (const Node& c : n.children) parts.push_back(Emit(c, 0));
        const std::string text = absl::StrJoin(parts, " | ");
        return prec >= 1 && parts.size() > 1 ? "( " + text + " )" : text;
      }
      case Node::Kind::kRepeat: {
        std::string body = Emit(n.children[0], 2);
        if (n.children[0].kind == Node::Kind::kRepeat) body = "( " + body + " )";
        std::string suffix;
        if (n.min == 0 && n.max < 0) {
          suffix = "*";
        } else if (n.min == 1 && n.max < 0) {
          suffix = "+";
        } else if (n.min == 0 && n.max == 1) {
          suffix = "?";
        } else if (n.min == n.max) {
          suffix = absl::StrCat("{", n.min, "}");
        } else if (n.max < 0) {
          suffix = absl::StrCat("{", n.min, ",}");
        } else {
          suffix = absl::StrCat("{", n.min, ",", n.max, "}");
        }
        return body + suffix;
      }
    }
    return "";
  }

 private:
  std::string Literal(const std::vector<uint32_t>& cps) const {
    if (!json_) return QuoteCodePoints(cps);
    std::string spelled;
    for (uint32_t cp : cps) spelled += JsonSpelling(cp);
    return QuoteCodePoints(CodePointsOf(spelled));
  }

  // The text for one character of `set`: whether it is an alternation (needs parentheses
  // in a sequence) or a single GBNF element (may take a quantifier as it is).
  struct CharsText {
    std::string text;
    bool alternation = false;
    bool element = true;
  };
  CharsText TextFor(const Ranges& set) const {
    if (IsSingle(set)) {
      const uint32_t cp = set[0].first;
      const bool escaped = json_ && (cp < 0x20 || cp == '"' || cp == '\\');
      return CharsText{Literal({cp}), false, !escaped};
    }
    if (!json_) return CharsText{ClassText(set), false, true};
    // Inside a JSON string: raw where JSON allows, else the escapes.
    std::vector<std::string> alternatives;
    const Ranges raw = Subtract(set, {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    if (!raw.empty()) alternatives.push_back(IsSingle(raw) ? Literal({raw[0].first}) : ClassText(raw));
    Ranges short_letters;  // the letter after the backslash
    static constexpr std::pair<uint32_t, char> kShort[] = {{'"', '"'},  {'\\', '\\'}, {0x08, 'b'}, {0x0C, 'f'},
                                                           {'\n', 'n'}, {'\r', 'r'},  {'\t', 't'}};
    for (const auto& [cp, letter] : kShort) {
      if (Contains(set, cp)) short_letters.emplace_back(letter, letter);
    }
    short_letters = Normalized(std::move(short_letters));
    if (!short_letters.empty()) {
      alternatives.push_back(IsSingle(short_letters) ? QuoteCodePoints({'\\', short_letters[0].first})
                                                     : "\"\\\\\" " + ClassText(short_letters));
    }
    // The other control characters as \u00xx, grouped by their high hex digit.
    std::vector<std::string> unicode_escapes;
    for (uint32_t high = 0; high < 2; ++high) {
      Ranges lows;
      for (uint32_t low = 0; low < 16; ++low) {
        const uint32_t cp = high * 16 + low;
        const bool has_short = cp == 0x08 || cp == 0x09 || cp == 0x0A || cp == 0x0C || cp == 0x0D;
        if (!has_short && Contains(set, cp)) {
          const uint32_t digit = low < 10 ? '0' + low : 'a' + (low - 10);
          lows.emplace_back(digit, digit);
        }
      }
      lows = Normalized(std::move(lows));
      if (lows.empty()) continue;
      const std::string low_text = IsSingle(lows) ? QuoteCodePoints({lows[0].first}) : ClassText(lows);
      unicode_escapes.push_back(absl::StrCat("\"", high, "\" ", low_text));
    }
    if (unicode_escapes.size() == 1) {
      alternatives.push_back("\"\\\\u00\" " + unicode_escapes[0]);
    } else if (unicode_escapes.size() == 2) {
      alternatives.push_back("\"\\\\u00\" ( " + absl::StrJoin(unicode_escapes, " | ") + " )");
    }
    return CharsText{absl::StrJoin(alternatives, " | "), alternatives.size() > 1,
                     alternatives.size() == 1 && !raw.empty()};
  }

  bool json_;
};

bool ValidRuleName(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

absl::StatusOr<std::string> Convert(std::string_view pattern, std::string_view rule_prefix, bool json_search) {
  if (!ValidRuleName(rule_prefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("regex: rule prefix \"", std::string(rule_prefix), "\" is not a GBNF rule name"));
  }
  RegexParser parser(pattern);
  auto alternatives = parser.ParseTop();
  if (!alternatives.ok()) return alternatives.status();
  const std::string any_rule = std::string(rule_prefix) + "-any";
  std::vector<Node> parts;
  bool uses_any = false;
  for (TopAlternative& alt : *alternatives) {
    if (!json_search) {
      parts.push_back(std::move(alt.node));
      continue;
    }
    // Search semantics: what the pattern does not anchor may be surrounded by anything.
    Node any_run = Repeat(RuleRef(any_rule), 0, -1);
    std::vector<Node> seq;
    if (!alt.anchored_start) seq.push_back(any_run);
    seq.push_back(std::move(alt.node));
    if (!alt.anchored_end) seq.push_back(any_run);
    uses_any = uses_any || !alt.anchored_start || !alt.anchored_end;
    parts.push_back(Concat(std::move(seq)));
  }
  const Node whole = Simplify(Alt(std::move(parts)));
  if (IsNever(whole)) return absl::InvalidArgumentError("regex: 0: the pattern matches no string");
  Emitter emitter(json_search);
  std::string out = absl::StrCat(std::string(rule_prefix), " ::= ", emitter.Emit(whole, 0), "\n");
  if (uses_any) absl::StrAppend(&out, any_rule, " ::= ", emitter.Emit(Chars(AnySet()), 0), "\n");
  return out;
}

}  // namespace

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern, std::string_view rule_prefix) {
  return Convert(pattern, rule_prefix, /*json_search=*/false);
}

absl::StatusOr<std::string> RegexToJsonStringGbnf(std::string_view pattern, std::string_view rule_prefix) {
  return Convert(pattern, rule_prefix, /*json_search=*/true);
}

absl::StatusOr<std::string> JsonStringExceptGbnf(const std::vector<std::string>& excluded,
                                                 std::string_view rule_prefix) {
  if (!ValidRuleName(rule_prefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("json string: rule prefix \"", std::string(rule_prefix), "\" is not a GBNF rule name"));
  }
  // A trie of the excluded values; node i's rule matches the rest of a literal whose
  // value so far spells the path to i.
  struct TrieNode {
    std::map<uint32_t, size_t> children;
    bool excluded = false;
  };
  std::vector<TrieNode> trie(1);
  for (const std::string& value : excluded) {
    size_t node = 0;
    for (uint32_t cp : CodePointsOf(value)) {
      auto it = trie[node].children.find(cp);
      if (it == trie[node].children.end()) {
        trie.emplace_back();
        it = trie[node].children.emplace(cp, trie.size() - 1).first;
      }
      node = it->second;
    }
    trie[node].excluded = true;
  }
  const std::string prefix(rule_prefix);
  const std::string any = prefix + "-any";
  const auto node_rule = [&](size_t i) { return absl::StrCat(prefix, "-t", i); };
  const std::string quote = R"("\"")";
  Emitter emitter(/*json=*/true);
  std::string out = absl::StrCat(prefix, " ::= ", quote, " ", node_rule(0), "\n");
  for (size_t i = 0; i < trie.size(); ++i) {
    std::vector<std::string> alternatives;
    if (!trie[i].excluded) alternatives.push_back(quote);  // the value ends here
    Ranges edges;
    for (const auto& [cp, child] : trie[i].children) edges.emplace_back(cp, cp);
    const Ranges others = Subtract(AnySet(), Normalized(std::move(edges)));
    alternatives.push_back(absl::StrCat(emitter.Emit(Chars(others), 1), " ", any, "* ", quote));  // leaves the trie
    for (const auto& [cp, child] : trie[i].children) {
      alternatives.push_back(absl::StrCat(emitter.Emit(Chars({{cp, cp}}), 1), " ", node_rule(child)));
    }
    absl::StrAppend(&out, node_rule(i), " ::= ", absl::StrJoin(alternatives, " | "), "\n");
  }
  absl::StrAppend(&out, any, " ::= ", emitter.Emit(Chars(AnySet()), 0), "\n");
  return out;
}

std::string GbnfQuote(std::string_view text) { return QuoteCodePoints(CodePointsOf(text)); }

}  // namespace crossreg::grammar

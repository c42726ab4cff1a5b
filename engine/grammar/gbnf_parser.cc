#include "engine/grammar/gbnf_parser.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/grammar/grammar_budget.h"

namespace crossreg::grammar {
namespace {

// Bounds on what a grammar may ask for, so a request cannot make the server build an
// enormous grammar: repetition counts and the number of rules.
constexpr int kMaxRepeat = 1000;
constexpr size_t kMaxRules = 100000;
constexpr int kMaxNesting = 64;
// What a generated rule's source shows of the grammar text.
constexpr size_t kMaxSourceShown = 60;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  absl::StatusOr<Grammar> Parse(std::string_view root) {
    // Names the text defines, so that a group's generated name never takes one of them.
    for (size_t at = text_.find("::="); at != std::string_view::npos; at = text_.find("::=", at + 3)) {
      size_t end = at;
      while (end > 0 && (text_[end - 1] == ' ' || text_[end - 1] == '\t')) --end;
      size_t begin = end;
      while (begin > 0 && IsNameChar(text_[begin - 1])) --begin;
      if (begin < end) reserved_.insert(std::string(text_.substr(begin, end - begin)));
    }
    SkipSpace(true);
    if (AtEnd()) return Error("the grammar is empty (expected `root ::= ...`)");
    while (!AtEnd()) {
      const size_t name_at = pos_;
      const std::string name = ParseName();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace(true);
      if (!Consume("::=")) return Error(absl::StrCat("expected `::=` after the rule name '", name, "'"));
      SkipSpace(true);  // the body may start on the next line
      const int32_t rule = RuleIndex(name);
      if (defined_[static_cast<size_t>(rule)]) {
        pos_ = name_at;
        return Error(absl::StrCat("rule '", name, "' is defined twice"));
      }
      defined_[static_cast<size_t>(rule)] = true;
      auto alternatives = ParseAlternatives(name, /*nested=*/false);
      if (!alternatives.ok()) return alternatives.status();
      grammar_.rules[static_cast<size_t>(rule)].alternatives = *std::move(alternatives);
      SkipSpace(true);
    }
    const auto it = index_.find(std::string(root));
    if (it == index_.end() || !defined_[static_cast<size_t>(it->second)]) {
      return absl::InvalidArgumentError(absl::StrCat("grammar: no rule named '", std::string(root), "' (the start rule)"));
    }
    grammar_.root = it->second;
    for (size_t r = 0; r < grammar_.rules.size(); ++r) {
      if (!defined_[r]) {
        return absl::InvalidArgumentError(
            absl::StrCat("grammar: rule '", grammar_.rules[r].name, "' is used but never defined"));
      }
    }
    if (absl::Status s = grammar_.Validate(); !s.ok()) return s;
    return std::move(grammar_);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool Consume(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }

  std::pair<int, int> LineColumn(size_t at) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return {line, column};
  }

  absl::Status Error(const std::string& what) const {
    const auto [line, column] = LineColumn(pos_);
    return absl::InvalidArgumentError(absl::StrCat("grammar: line ", line, ", column ", column, ": ", what));
  }
  // A size limit (gbnf_parser.h): RESOURCE_EXHAUSTED, so that a compiler of generated
  // grammar text can tell the client's too-large ask from its own bug.
  absl::Status LimitError(const std::string& what) const {
    return absl::ResourceExhaustedError(Error(what).message());
  }

  // The text [begin, pos_) as a generated rule's source.
  std::string SourceFrom(size_t begin) const {
    std::string shown(text_.substr(begin, std::min(pos_ - begin, kMaxSourceShown)));
    for (char& c : shown) {
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
    const auto [line, column] = LineColumn(begin);
    return absl::StrCat("`", shown, pos_ - begin > kMaxSourceShown ? "..." : "", "` (line ", line, ", column ",
                        column, ")");
  }

  // Elements of the expanded grammar so far, bounded (kMaxGrammarElements).
  absl::Status CountElements(size_t added) {
    elements_ += added;
    if (elements_ > kMaxGrammarElements) {
      return LimitError(absl::StrCat("the grammar expands to more than ", kMaxGrammarElements,
                                " elements (repetition counts multiply what they repeat)"));
    }
    return absl::OkStatus();
  }

  // Spaces, tabs, comments; newlines too where a rule may continue over lines.
  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether a new rule starts here (`name ::=`), without moving.
  bool AtRuleStart() {
    const size_t saved = pos_;
    const bool yes = !ParseName().empty() && (SkipSpace(true), Consume("::="));
    pos_ = saved;
    return yes;
  }

  int32_t RuleIndex(const std::string& name) {
    auto [it, added] = index_.emplace(name, static_cast<int32_t>(grammar_.rules.size()));
    if (added) {
      grammar_.rules.push_back(Rule{name, {}, ""});
      defined_.push_back(false);
    }
    return it->second;
  }

  absl::StatusOr<int32_t> NewRule(const std::string& parent, std::vector<Sequence> alternatives,
                                  std::string source = "") {
    if (grammar_.rules.size() >= kMaxRules) return LimitError(absl::StrCat("more than ", kMaxRules, " rules"));
    size_t elements = 0;
    for (const Sequence& seq : alternatives) elements += seq.size() + 1;
    if (absl::Status s = CountElements(elements); !s.ok()) return s;
    std::string name;
    do {
      name = absl::StrCat(parent, "-", ++generated_);
    } while (index_.contains(name) || reserved_.contains(name));
    const int32_t rule = RuleIndex(name);
    defined_[static_cast<size_t>(rule)] = true;
    grammar_.rules[static_cast<size_t>(rule)].alternatives = std::move(alternatives);
    grammar_.rules[static_cast<size_t>(rule)].source = std::move(source);
    return rule;
  }

  int32_t CharSet(CodePointSet set) {
    grammar_.char_sets.push_back(std::move(set));
    return static_cast<int32_t>(grammar_.char_sets.size() - 1);
  }
  Element Char(uint32_t cp) { return {Element::Kind::kChars, CharSet(CodePointSet::FromRanges({{cp, cp}}, false))}; }

  // One UTF-8 character of the grammar text.
  absl::StatusOr<uint32_t> DecodeUtf8() {
    const auto c = static_cast<unsigned char>(Peek());
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > text_.size()) return Error("the grammar is not valid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7fu >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(text_[pos_ + static_cast<size_t>(k)]);
      if ((b & 0xc0) != 0x80) return Error("the grammar is not valid UTF-8");
      cp = (cp << 6) | (b & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
    const uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : n == 4 ? 0x10000 : 0;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return Error("the grammar is not valid UTF-8");
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  absl::StatusOr<uint32_t> ParseHex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = Peek();
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) return Error(absl::StrCat("expected ", digits, " hexadecimal digits"));
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF) return Error("code point beyond U+10FFFF");
    // UTF-8 has no encoding for a surrogate: a terminal of one could never match, and
    // a grammar that cannot be satisfied must be refused, not served unconstrained.
    if (v >= 0xD800 && v <= 0xDFFF) {
      pos_ -= static_cast<size_t>(digits) + 2;
      return Error(absl::StrCat("\\u", absl::Hex(v, absl::kZeroPad4),
                                " is a surrogate, not a character (UTF-8 cannot encode it)"));
    }
    return v;
  }

  // A character of a literal or class, escapes decoded.
  absl::StatusOr<uint32_t> ParseChar() {
    if (AtEnd()) return Error("unexpected end of the grammar");
    if (Peek() == '\n') return Error("a literal or class may not contain a newline (write \\n)");
    if (Peek() != '\\') return DecodeUtf8();
    ++pos_;
    const char e = Peek();
    ++pos_;
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'x':
        return ParseHex(2);
      case 'u':
        return ParseHex(4);
      case 'U':
        return ParseHex(8);
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
      case '.':
        return static_cast<uint32_t>(e);
      default:
        --pos_;
        return Error(absl::StrCat("unknown escape '\\", std::string(1, e), "'"));
    }
  }

  absl::StatusOr<std::vector<Sequence>> ParseAlternatives(const std::string& rule, bool nested) {
    std::vector<Sequence> alternatives;
    while (true) {
      auto seq = ParseSequence(rule, nested);
      if (!seq.ok()) return seq.status();
      alternatives.push_back(*std::move(seq));
      SkipSpace(nested);
      if (Peek() == '|') {
        ++pos_;
        SkipSpace(true);
        continue;
      }
      // A rule's alternatives may go on, after `|`, on later lines.
      if (!nested) {
        const size_t saved = pos_;
        SkipSpace(true);
        if (Peek() == '|') {
          ++pos_;
          SkipSpace(true);
          continue;
        }
        pos_ = saved;
      }
      return alternatives;
    }
  }

  absl::StatusOr<Sequence> ParseSequence(const std::string& rule, bool nested) {
    Sequence seq;
    size_t last_start = 0;  // where the last element (literal, class, group, reference) begins in seq
    size_t last_text = 0;   // ... and in the text
    while (true) {
      SkipSpace(nested);
      if (AtEnd()) break;
      const char c = Peek();
      if (c == '|' || c == ')' || c == '\n') break;
      if (c != '*' && c != '+' && c != '?' && c != '{') last_text = pos_;
      if (c == '"') {
        ++pos_;
        last_start = seq.size();
        while (Peek() != '"') {
          auto cp = ParseChar();
          if (!cp.ok()) return cp.status();
          seq.push_back(Char(*cp));
        }
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        const bool negated = Peek() == '^';
        if (negated) ++pos_;
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        while (Peek() != ']') {
          auto lo = ParseChar();
          if (!lo.ok()) return lo.status();
          uint32_t hi = *lo;
          if (Peek() == '-' && Peek(1) != ']') {
            ++pos_;
            auto end = ParseChar();
            if (!end.ok()) return end.status();
            if (*end < *lo) return Error("a character range ends below its start");
            hi = *end;
          }
          ranges.emplace_back(*lo, hi);
        }
        ++pos_;
        last_start = seq.size();
        seq.push_back({Element::Kind::kChars, CharSet(CodePointSet::FromRanges(std::move(ranges), negated))});
      } else if (c == '.') {
        ++pos_;
        last_start = seq.size();
        seq.push_back({Element::Kind::kChars, CharSet(CodePointSet::FromRanges({{0, 0x10FFFF}}, false))});
      } else if (c == '(') {
        if (++depth_ > kMaxNesting) return LimitError(absl::StrCat("groups nested deeper than ", kMaxNesting));
        ++pos_;
        SkipSpace(true);
        auto inner = ParseAlternatives(rule, /*nested=*/true);
        if (!inner.ok()) return inner.status();
        SkipSpace(true);
        if (Peek() != ')') return Error("expected ')'");
        ++pos_;
        --depth_;
        auto group = NewRule(rule, *std::move(inner), SourceFrom(last_text));
        if (!group.ok()) return group.status();
        last_start = seq.size();
        seq.push_back({Element::Kind::kRule, *group});
      } else if (IsNameChar(c)) {
        if (!nested && AtRuleStart()) break;
        const std::string name = ParseName();
        last_start = seq.size();
        seq.push_back({Element::Kind::kRule, RuleIndex(name)});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (seq.empty() || last_start >= seq.size()) return Error(absl::StrCat("'", std::string(1, c), "' follows nothing"));
        auto status = ApplyRepetition(rule, seq, last_start, last_text);
        if (!status.ok()) return status;
      } else {
        return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
      }
    }
    return seq;
  }

  // Replaces seq[from..] (the last element) by its repetition, as rules of its own.
  absl::Status ApplyRepetition(const std::string& rule, Sequence& seq, size_t from, size_t text_from) {
    int min = 0, max = -1;  // max -1: unbounded
    const char op = Peek();
    ++pos_;
    if (op == '+') {
      min = 1;
    } else if (op == '?') {
      max = 1;
    } else if (op == '{') {
      SkipSpace(false);
      auto number = [&]() -> int {
        int v = -1;
        while (Peek() >= '0' && Peek() <= '9') {
          v = std::min((v < 0 ? 0 : v) * 10 + (Peek() - '0'), kMaxRepeat + 1);
          ++pos_;
        }
        return v;
      };
      min = number();
      if (min < 0) return Error("expected a count after '{'");
      SkipSpace(false);
      max = min;
      if (Peek() == ',') {
        ++pos_;
        SkipSpace(false);
        max = number();  // -1: unbounded
        SkipSpace(false);
      }
      if (Peek() != '}') return Error("expected '}'");
      ++pos_;
      if (min > kMaxRepeat || max > kMaxRepeat) return LimitError(absl::StrCat("a repetition count above ", kMaxRepeat));
      if (max >= 0 && max < min) return Error("a repetition's maximum is below its minimum");
    }
    const Sequence item(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.end());
    const std::string source = SourceFrom(text_from);
    seq.resize(from);
    if (absl::Status s = CountElements(item.size() * static_cast<size_t>(min)); !s.ok()) return s;
    for (int i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (max < 0) {
      // item* as `r ::= item r | ""`: right recursion, so matching never loops.
      auto star = NewRule(rule, {}, source);
      if (!star.ok()) return star.status();
      Sequence again = item;
      again.push_back({Element::Kind::kRule, *star});
      if (absl::Status s = CountElements(again.size() + 2); !s.ok()) return s;
      grammar_.rules[static_cast<size_t>(*star)].alternatives = {again, {}};
      seq.push_back({Element::Kind::kRule, *star});
    } else if (max > min) {
      // Up to k more as nested optionals: r_k ::= item r_{k-1} | "".
      int32_t inner = -1;
      for (int k = 0; k < max - min; ++k) {
        Sequence more = item;
        if (inner >= 0) more.push_back({Element::Kind::kRule, inner});
        auto opt = NewRule(rule, {more, {}}, source);
        if (!opt.ok()) return opt.status();
        inner = *opt;
      }
      seq.push_back({Element::Kind::kRule, inner});
    }
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
  std::unordered_map<std::string, int32_t> index_;
  std::unordered_set<std::string> reserved_;  // names the text defines
  std::vector<bool> defined_;
  int generated_ = 0;
  int depth_ = 0;  // groups open
  size_t elements_ = 0;
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root) {
  return GbnfParser(text).Parse(root);
}

}  // namespace crossreg::grammar

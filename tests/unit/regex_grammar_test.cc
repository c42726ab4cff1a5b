// Regular expressions to GBNF: each supported construct on strings it must accept and
// reject, the refusals (message "regex: <offset>: <construct> ..."), and two
// differential checks against std::regex (ECMAScript) over every short string of a small
// alphabet: whole-string matching for RegexToGbnf, and search over JSON string literals
// for RegexToJsonStringGbnf.
#include "engine/grammar/regex_grammar.h"

#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace crossreg::grammar {
namespace {

class Checker {
 public:
  bool Accepts(std::string_view text) const {
    GrammarMatcher m(compiled_);
    return m.AcceptBytes(text) && m.CanEnd();
  }
  std::shared_ptr<const CompiledGrammar> compiled_;
};

// `root ::= <wrapper around the rule>`, parsed; fails the test if anything does not.
std::optional<Checker> Build(const std::string& pattern, bool json) {
  auto rules = json ? RegexToJsonStringGbnf(pattern, "pat") : RegexToGbnf(pattern, "pat");
  EXPECT_TRUE(rules.ok()) << pattern << ": " << rules.status();
  if (!rules.ok()) return std::nullopt;
  const std::string gbnf = (json ? "root ::= \"\\\"\" pat \"\\\"\"\n" : "root ::= pat\n") + *rules;
  for (char c : gbnf) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7F)) << "raw byte " << static_cast<int>(c);
  auto grammar = ParseGbnf(gbnf);
  EXPECT_TRUE(grammar.ok()) << pattern << ": " << grammar.status() << "\n" << gbnf;
  if (!grammar.ok()) return std::nullopt;
  return Checker{std::make_shared<const CompiledGrammar>(*std::move(grammar))};
}

struct Case {
  std::string pattern;
  std::vector<std::string> accepted, rejected;
};

TEST(RegexGrammarTest, SupportedConstructs) {
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"ab", "abcd", ""}},
      {"a|bc", {"a", "bc"}, {"abc", "b"}},
      {"(ab)+", {"ab", "abab"}, {"", "aba"}},
      {"(?:ab)*c", {"c", "abc", "ababc"}, {"ab", "abac"}},
      {"a?b", {"b", "ab"}, {"aab"}},
      {"a{2}", {"aa"}, {"a", "aaa"}},
      {"a{2,}", {"aa", "aaaa"}, {"a"}},
      {"a{1,3}", {"a", "aaa"}, {"", "aaaa"}},
      {"(ab){0,2}c", {"c", "abc", "ababc"}, {"abababc"}},
      {"a+?b*?c??", {"a", "aabbc"}, {"b"}},
      {"[a-c]x", {"ax", "cx"}, {"dx", "x"}},
      {"[^a-c]", {"d", "\xc3\xa9", "\n"}, {"a", ""}},
      {"[^]", {"a", "\n"}, {""}},
      {"[\\d.-]+", {"1.5-2"}, {"a"}},
      {"[\\w\\s]", {"_", " "}, {"-"}},
      {"[\\b]", {"\b"}, {"b"}},
      {"\\d\\d", {"42"}, {"4a"}},
      {"\\w+", {"a_Z9"}, {"a-b"}},
      {"\\s", {" ", "\t", "\n", "\xc2\xa0", "\xe2\x80\xa8"}, {"a"}},
      {"\\D\\W\\S", {"a-b"}, {"1-b", "aab", "a- "}},
      {"\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\/\\\\", {".*+?()[]{}|^$/\\"}, {}},
      {"a.c",
       {"abc", "a c",
        "a\xc3\xa9"
        "c",
        "a\tc"},
       {"a\nc", "a\rc", "ac"}},
      {"\\n\\t\\r\\f\\v\\0", {std::string("\n\t\r\f\v\0", 6)}, {}},
      {"\\u00e9\\x41\\u{1F600}\\cJ",
       {"\xc3\xa9"
        "A\xf0\x9f\x98\x80\n"},
       {}},
      {"\\ud83d\\ude00", {"\xf0\x9f\x98\x80"}, {}},
      {"^abc$", {"abc"}, {"xabc", "abcx"}},
      {"(?<year>\\d{4})-(?P<month>\\d{2})", {"2024-01"}, {"2024-1"}},
      {"a\"b\\\\c", {"a\"b\\c"}, {"a\"bc"}},
      {"(a*)*b", {"b", "aab"}, {"a"}},
      {"(a|)+", {"", "a", "aa"}, {"b"}},
      {"(a?b?)*c", {"c", "abc", "bac", "aabbc"}, {"cc"}},
      {"(|a)b", {"b", "ab"}, {"aab"}},
      {"x{0}", {""}, {"x"}},
      {"", {""}, {"a"}},
      {"\xf0\x9f\x98\x80+",
       {"\xf0\x9f\x98\x80\xf0\x9f\x98\x80"},
       {"\xf0\x9f\x98\x80"
        "a"}},
      {"[\xf0\x9f\x98\x80-\xf0\x9f\x98\x82]", {"\xf0\x9f\x98\x81"}, {"\xf0\x9f\x98\x83"}},
      {"caf\xc3\xa9", {"caf\xc3\xa9"}, {"cafe"}},
      {"a}b]", {"a}b]"}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    auto checker = Build(c.pattern, /*json=*/false);
    ASSERT_TRUE(checker.has_value());
    for (const std::string& s : c.accepted) EXPECT_TRUE(checker->Accepts(s)) << "'" << s << "'";
    for (const std::string& s : c.rejected) EXPECT_FALSE(checker->Accepts(s)) << "'" << s << "'";
  }
}

TEST(RegexGrammarTest, RefusalsNameTheConstructAndOffset) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "regex: 3: backreference \\1 not supported"},
      {"a(?=b)", "regex: 1: lookahead (?= not supported"},
      {"a(?!b)", "regex: 1: negative lookahead (?! not supported"},
      {"(?<=a)b", "regex: 0: lookbehind (?<= not supported"},
      {"(?<!a)b", "regex: 0: negative lookbehind (?<! not supported"},
      {"a^b", "regex: 1: anchor ^"},
      {"a$b", "regex: 1: anchor $"},
      {"(^a)", "regex: 1: anchor ^"},
      {"(a$)", "regex: 2: anchor $"},
      {"\\bword", "regex: 0: word boundary \\b not supported"},
      {"a\\B", "regex: 1: word boundary \\B not supported"},
      {"a*+", "regex: 2: possessive quantifier not supported"},
      {"a{2}+", "regex: 4: possessive quantifier not supported"},
      {"(?i)abc", "regex: 0: inline flags"},
      {"\\k<n>", "regex: 0: named backreference \\k not supported"},
      {"(?P=n)", "regex: 0: backreference (?P=name) not supported"},
      {"\\p{L}", "regex: 0: Unicode property escape \\p not supported"},
      {"(?>a)", "regex: 0: atomic group"},
      {"\\Aa", "regex: 0: anchor \\A not supported"},
      {"[]a]", "regex: 0: the empty class []"},
      {"*a", "regex: 0: quantifier '*' with nothing to repeat"},
      {"a**", "regex: 2: quantifier with nothing to repeat"},
      {"a{1001}", "regex: 1: repetition count above 1000 not supported"},
      {"a{3,2}", "regex: 1: "},
      {"a{", "regex: 1: "},
      {"(ab", "regex: 0: unterminated group"},
      {"ab)", "regex: 2: unmatched ')'"},
      {"[ab", "regex: 0: unterminated character class"},
      {"[z-a]", "regex: 2: character class range out of order"},
      {"\\q", "regex: 0: unknown escape \\q"},
      {"ab\\", "regex: 2: trailing backslash"},
      {"\\xZ1", "regex: 0: "},
      {"a\xff", "regex: 1: invalid UTF-8"},
  };
  for (const auto& [pattern, prefix] : cases) {
    auto rules = RegexToGbnf(pattern);
    ASSERT_FALSE(rules.ok()) << pattern << "\n" << *rules;
    EXPECT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(rules.status().message(), prefix))
        << pattern << ": " << rules.status().message() << "\nwanted " << prefix;
  }
  EXPECT_FALSE(RegexToGbnf("a", "bad name").ok());
}

TEST(RegexGrammarTest, NullableBodiesStayLinear) {
  // 300 optional parts under a star: rewritten as an alternation, not 300 x 300 nodes.
  std::string pattern = "(";
  for (int i = 0; i < 300; ++i) pattern += "a?b?";
  pattern += ")*c";
  auto rules = RegexToGbnf(pattern);
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_LT(rules->size(), 4 * pattern.size());
  auto checker = Build(pattern, /*json=*/false);
  ASSERT_TRUE(checker.has_value());
  EXPECT_TRUE(checker->Accepts("c"));
  EXPECT_TRUE(checker->Accepts("abbaabc"));
  EXPECT_FALSE(checker->Accepts("abd"));
}

// Every string of `alphabet` up to `max_len` characters.
std::vector<std::string> AllStrings(const std::vector<std::string>& alphabet, int max_len) {
  std::vector<std::string> out = {""};
  std::vector<std::string> frontier = {""};
  for (int len = 1; len <= max_len; ++len) {
    std::vector<std::string> next;
    for (const std::string& s : frontier) {
      for (const std::string& c : alphabet) next.push_back(s + c);
    }
    out.insert(out.end(), next.begin(), next.end());
    frontier = std::move(next);
  }
  return out;
}

TEST(RegexGrammarTest, AgreesWithStdRegexOnWholeMatches) {
  const std::vector<std::string> patterns = {
      "a*b",    "(a|b)*a", "[ab0]+",         "a?b?0?",      "(ab|a)(b|)",   ".*",       "[^a]*",
      "\\s\\S", "\\w*-",   "(a{1,2}b){0,2}", "(?:a|b0){2}", "0|a+",         "^(a|b)*$", "[\\s\\d]+",
      "(a*)*",  "(|a)b",   "a{2,}|b",        "\\D?\\W?",    "((a|)(b|))*0", "[a-b-]",   ".?.?-",
  };
  const auto strings = AllStrings({"a", "b", "0", " ", "-", "\n"}, 4);
  for (const std::string& pattern : patterns) {
    SCOPED_TRACE(pattern);
    auto checker = Build(pattern, /*json=*/false);
    ASSERT_TRUE(checker.has_value());
    const std::regex re(pattern, std::regex::ECMAScript);
    for (const std::string& s : strings) {
      ASSERT_EQ(checker->Accepts(s), std::regex_match(s, re)) << "'" << s << "'";
    }
  }
}

TEST(RegexGrammarTest, JsonStringsAgreeWithStdRegexSearch) {
  const std::vector<std::string> patterns = {
      "a",    "^a",        "a$",  "^a$", "\"", "\\\\", "^[^a]*$", "\\n",           "^.$",    "[\\x00-\\x1f]",
      "a|^b", "^(a|\")+$", "\\/", "",    "^$", "b*",   "^\\s",    "^[\\s\\S]{2}$", "[^\"]$",
  };
  const auto strings = AllStrings({"a", "b", "\"", "\\", "\n", "\x01", "/"}, 3);
  for (const std::string& pattern : patterns) {
    SCOPED_TRACE(pattern);
    auto checker = Build(pattern, /*json=*/true);
    ASSERT_TRUE(checker.has_value());
    const std::regex re(pattern, std::regex::ECMAScript);
    for (const std::string& s : strings) {
      const std::string literal = nlohmann::json(s).dump();  // the canonical spelling
      ASSERT_EQ(checker->Accepts(literal), std::regex_search(s, re)) << literal;
    }
  }
  // Other spellings of the same value are outside the subset.
  auto checker = Build("^a/$", /*json=*/true);
  ASSERT_TRUE(checker.has_value());
  EXPECT_TRUE(checker->Accepts("\"a/\""));
  EXPECT_FALSE(checker->Accepts("\"\\u0061/\""));
  EXPECT_FALSE(checker->Accepts("\"a\\/\""));
}

TEST(RegexGrammarTest, QuoteEscapesForGbnf) {
  EXPECT_EQ(GbnfQuote("a\"b\\c\n\x01\x7f\xc3\xa9\xf0\x9f\x98\x80"), "\"a\\\"b\\\\c\\n\\x01\\x7F\\u00E9\\U0001F600\"");
  auto grammar = ParseGbnf("root ::= " + GbnfQuote("a\"b\\c\n\x01\xc3\xa9\xf0\x9f\x98\x80") + "\n");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(GrammarAccepts(*grammar, "a\"b\\c\n\x01\xc3\xa9\xf0\x9f\x98\x80"));
}

}  // namespace
}  // namespace crossreg::grammar

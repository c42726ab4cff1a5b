// The GBNF parser, the grammar's own checks and the matcher: what a grammar accepts,
// byte by byte (characters split across tokens), and how bad grammars are refused.
#include <string>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "gtest/gtest.h"

namespace crossreg::grammar {
namespace {

Grammar Parse(std::string_view text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Grammar{};
}

std::string Refusal(std::string_view text) {
  auto g = ParseGbnf(text);
  return g.ok() ? "accepted" : std::string(g.status().message());
}

TEST(GbnfParserTest, LiteralsClassesGroupsAndRepetition) {
  const Grammar g = Parse(R"(
    # a comment
    root ::= greeting " " name ("!" | "?")?
    greeting ::= "hi" | "hello"
    name ::= [A-Z] [a-z]* )");
  EXPECT_TRUE(GrammarAccepts(g, "hi Bob!"));
  EXPECT_TRUE(GrammarAccepts(g, "hello X"));
  EXPECT_TRUE(GrammarAccepts(g, "hello Al?"));
  EXPECT_FALSE(GrammarAccepts(g, "hello al"));
  EXPECT_FALSE(GrammarAccepts(g, "hey Bob"));
  EXPECT_FALSE(GrammarAccepts(g, "hi Bob!!"));
  EXPECT_FALSE(GrammarAccepts(g, "hi"));
}

TEST(GbnfParserTest, BoundedRepetitionCountsExactly) {
  const Grammar g = Parse(R"(root ::= [0-9]{2,4} "-" "ab"{2} "x"{1,} "y"{0,1})");
  EXPECT_TRUE(GrammarAccepts(g, "12-ababx"));
  EXPECT_TRUE(GrammarAccepts(g, "1234-ababxxxy"));
  EXPECT_FALSE(GrammarAccepts(g, "1-ababx"));
  EXPECT_FALSE(GrammarAccepts(g, "12345-ababx"));
  EXPECT_FALSE(GrammarAccepts(g, "12-abx"));
  EXPECT_FALSE(GrammarAccepts(g, "12-abab"));
  EXPECT_FALSE(GrammarAccepts(g, "12-ababxyy"));
}

TEST(GbnfParserTest, EscapesNegatedClassesAndAnyCharacter) {
  const Grammar g = Parse(R"(root ::= "\"" [^"\\\n]* "\"" "\x41\u00e9" . "\t")");
  EXPECT_TRUE(GrammarAccepts(g, "\"a b\"Aé€\t"));
  EXPECT_TRUE(GrammarAccepts(g, "\"\"Aéz\t"));
  EXPECT_FALSE(GrammarAccepts(g, "\"a\"b\"Aéz\t"));
  EXPECT_FALSE(GrammarAccepts(g, "\"a\nb\"Aéz\t"));
  EXPECT_FALSE(GrammarAccepts(g, "\"\"Aé\t"));
}

TEST(GbnfParserTest, RulesSpanLinesAfterTheirOperatorAndInsideGroups) {
  const Grammar g = Parse("root ::=\n  \"[\" (\n    item\n    (\",\" item)*\n  )? \"]\"\n"
                          "item ::= \"a\"\n  | \"b\"\n");
  EXPECT_TRUE(GrammarAccepts(g, "[]"));
  EXPECT_TRUE(GrammarAccepts(g, "[a,b,a]"));
  EXPECT_FALSE(GrammarAccepts(g, "[a,]"));
}

TEST(GbnfParserTest, RecursionOnTheRightIsAccepted) {
  const Grammar g = Parse(R"g(root ::= "(" root ")" | "")g");
  EXPECT_TRUE(GrammarAccepts(g, ""));
  EXPECT_TRUE(GrammarAccepts(g, "((()))"));
  EXPECT_FALSE(GrammarAccepts(g, "(()"));
}

TEST(GbnfParserTest, BadGrammarsAreRefusedWithTheirPlace) {
  EXPECT_EQ(Refusal(""), "grammar: line 1, column 1: the grammar is empty (expected `root ::= ...`)");
  EXPECT_EQ(Refusal("root ::= \"abc"), "grammar: line 1, column 14: unexpected end of the grammar");
  EXPECT_EQ(Refusal("root ::= x"), "grammar: rule 'x' is used but never defined");
  EXPECT_EQ(Refusal("start ::= \"a\""), "grammar: no rule named 'root' (the start rule)");
  EXPECT_EQ(Refusal("root ::= \"a\"\nroot ::= \"b\""), "grammar: line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(Refusal("root ::= root \"a\" | \"b\""),
            "grammar: rule 'root' is left-recursive (it can reach itself before matching a character); "
            "rewrite it right-recursively or with repetition");
  EXPECT_EQ(Refusal("root ::= e root \"a\" | \"b\"\ne ::= \"\" | \"x\""),
            "grammar: rule 'root' is left-recursive (it can reach itself before matching a character); "
            "rewrite it right-recursively or with repetition");
  EXPECT_EQ(Refusal("root ::= \"a\"{3,2}"), "grammar: line 1, column 18: a repetition's maximum is below its minimum");
  EXPECT_EQ(Refusal("root ::= \"a\"{5000}"), "grammar: line 1, column 19: a repetition count above 1000");
  EXPECT_EQ(Refusal("root ::= * \"a\""), "grammar: line 1, column 10: '*' follows nothing");
  EXPECT_EQ(Refusal("root ::= [z-a]"), "grammar: line 1, column 14: a character range ends below its start");
  EXPECT_EQ(Refusal("root ::= \"\\q\""), "grammar: line 1, column 12: unknown escape '\\q'");
  EXPECT_EQ(Refusal("root ::= (\"a\""), "grammar: line 1, column 14: expected ')'");
  EXPECT_EQ(Refusal("root = \"a\""), "grammar: line 1, column 6: expected `::=` after the rule name 'root'");
  EXPECT_EQ(Refusal("root ::= \"a\" @"), "grammar: line 1, column 14: unexpected '@'");
}

TEST(GbnfParserTest, GroupsNeverTakeTheNameOfALaterRule) {
  const Grammar g = Parse("root ::= ( \"a\" ) root-1 \"c\"\nroot-1 ::= \"b\"");
  EXPECT_TRUE(GrammarAccepts(g, "abc"));
  EXPECT_FALSE(GrammarAccepts(g, "ac"));
}

TEST(GbnfParserTest, ToGbnfParsesBackToTheSameLanguage) {
  const Grammar g = Parse(R"(root ::= ("ab" | [x-z\]]+)? "-" [^a-c]{1,2})");
  const Grammar back = Parse(g.ToGbnf());
  for (const char* s : {"ab-d", "-dd", "xz]-é", "-", "ab-a", "abx-d", "-ddd"}) {
    EXPECT_EQ(GrammarAccepts(g, s), GrammarAccepts(back, s)) << s << "\n" << g.ToGbnf();
  }
}

TEST(GrammarMatcherTest, CharactersMayArriveSplitAcrossCalls) {
  const Grammar g = Parse(R"(root ::= "é" [α-ω]+)");
  GrammarMatcher m(std::make_shared<const CompiledGrammar>(g));
  const std::string text = "éβγ";
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(m.AcceptByte(static_cast<uint8_t>(text[i]))) << i;
    EXPECT_EQ(m.CanEnd(), i + 1 >= 4 && (i + 1) % 2 == 0) << i;  // ends after a whole Greek letter only
  }
  // A lead byte no allowed character starts with fails at once, and leaves the state as it was.
  GrammarMatcher before = m;
  EXPECT_FALSE(m.AcceptByte(0xe2));  // U+2000.. cannot be a Greek small letter
  EXPECT_TRUE(m == before);
  EXPECT_FALSE(m.AcceptBytes("\xce\xb2" "a"));  // "βa": the β fits, the a does not: all undone
  EXPECT_TRUE(m == before);
  EXPECT_FALSE(m.AcceptByte(0x80));  // a continuation byte with nothing begun
}

TEST(GrammarMatcherTest, ExhaustedWhenNothingMayFollow) {
  const Grammar g = Parse(R"(root ::= "ab" "c"?)");
  GrammarMatcher m(std::make_shared<const CompiledGrammar>(g));
  ASSERT_TRUE(m.AcceptBytes("ab"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Exhausted());
  ASSERT_TRUE(m.AcceptBytes("c"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.Exhausted());
  EXPECT_FALSE(m.AcceptBytes("c"));
}

}  // namespace
}  // namespace crossreg::grammar

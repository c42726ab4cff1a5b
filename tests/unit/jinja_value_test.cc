// The Python conversions under the interpreter, against what CPython 3.11 gives: float
// and str repr, int() and float() of text, json.dumps as tojson calls it, the Unicode case
// mappings of str methods, and the value model's equality and hashing.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/jinja_json.h"
#include "server/chat/jinja_python_text.h"
#include "server/chat/jinja_unicode.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {
namespace {

TEST(JinjaPythonText, FloatReprIsPythons) {
  const std::vector<std::pair<double, const char*>> cases = {
      {0.1, "0.1"},
      {1.0 / 3, "0.3333333333333333"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {123.0, "123.0"},
      {1e-4, "0.0001"},
      {1e-5, "1e-05"},
      {-0.0, "-0.0"},
      {2.5e-7, "2.5e-07"},
      {1e22, "1e+22"},
      {1.5e300, "1.5e+300"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {0.1 + 0.2, "0.30000000000000004"},
      {9007199254740993.0, "9007199254740992.0"},
      {HUGE_VAL, "inf"},
      {-HUGE_VAL, "-inf"},
      {std::nan(""), "nan"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(PythonFloatRepr(value), expected);
}

TEST(JinjaPythonText, StringReprPicksQuotesAndEscapesAsPython) {
  EXPECT_EQ(PythonStringRepr("it's"), "\"it's\"");
  EXPECT_EQ(PythonStringRepr("say \"x\""), "'say \"x\"'");
  EXPECT_EQ(PythonStringRepr("both '\""), "'both \\'\"'");
  EXPECT_EQ(PythonStringRepr(std::string("\xc3\xa9\xe2\x80\x8b\x00\x7f\n\t\\", 10)), "'\xc3\xa9\\u200b\\x00\\x7f\\n\\t\\\\'");
  EXPECT_EQ(PythonStringRepr("\xc2\xa0\xf0\x9f\x98\x80\xe6\x97\xa5"), "'\\xa0\xf0\x9f\x98\x80\xe6\x97\xa5'");
}

TEST(JinjaPythonText, IntAndFloatOfTextAreLikePython) {
  EXPECT_EQ(*ParsePythonInt("12"), 12);
  EXPECT_EQ(*ParsePythonInt(" -7 "), -7);
  EXPECT_EQ(*ParsePythonInt("1_000"), 1000);
  EXPECT_EQ(*ParsePythonInt("0777"), 777);
  EXPECT_EQ(*ParsePythonInt("+0x1F", 0), 31);
  EXPECT_EQ(*ParsePythonInt("0b101", 0), 5);
  EXPECT_EQ(*ParsePythonInt("-9223372036854775808"), INT64_MIN);
  for (const char* bad : {"1__0", "_1", "12a", "", "9223372036854775808"}) EXPECT_FALSE(ParsePythonInt(bad).ok()) << bad;
  EXPECT_FALSE(ParsePythonInt("0777", 0).ok());
  EXPECT_EQ(*ParsePythonFloat("1.5"), 1.5);
  EXPECT_EQ(*ParsePythonFloat(" 1e3 "), 1000.0);
  EXPECT_EQ(*ParsePythonFloat("1_0.5"), 10.5);
  EXPECT_EQ(*ParsePythonFloat(".5"), 0.5);
  EXPECT_EQ(*ParsePythonFloat("5."), 5.0);
  EXPECT_EQ(*ParsePythonFloat("-Infinity"), -HUGE_VAL);
  EXPECT_TRUE(std::isnan(*ParsePythonFloat("nan")));
  EXPECT_EQ(*ParsePythonFloat("1e999"), HUGE_VAL);
  for (const char* bad : {"1e", "x", "1_", "0x10", ""}) EXPECT_FALSE(ParsePythonFloat(bad).ok()) << bad;
}

TEST(JinjaPythonText, PercentAndBraceFormatting) {
  EXPECT_EQ(*PercentFormat("%s-%d-%05.2f|%x|%5s|%-3s|", Value::Tuple({Value::String("a"), Value::Int(3),
                                                                      Value::Float(2.5), Value::Int(255),
                                                                      Value::String("r"), Value::String("l")})),
            "a-3-02.50|ff|    r|l  |");
  EXPECT_EQ(*PercentFormat("%r %%", Value::String("x")), "'x' %");
  EXPECT_FALSE(PercentFormat("%s", Value::Tuple({})).ok());
  EXPECT_FALSE(PercentFormat("x", Value::Int(1)).ok());  // not all arguments converted
  CallArgs args;
  args.positional = {Value::Int(1), Value::String("b")};
  args.keywords = {{"k", Value::None()}};
  EXPECT_EQ(*BraceFormat("{} and {!r} {k} {{}}", args), "1 and 'b' None {}");
}

TEST(JinjaJson, DumpsAsPythonJsonDumps) {
  auto value = ValueFromJson(nlohmann::ordered_json::parse(
      R"({"b": [1, 2.5, 1e20, 1e-7, null, true, "é\"\\\n\t\u0001\u007f\u2028"], "a": {}, "c": []})"));
  ASSERT_TRUE(value.ok()) << value.status();
  JsonDumpOptions options;
  EXPECT_EQ(*PythonJsonDumps(*value, options),
            "{\"b\": [1, 2.5, 1e+20, 1e-07, null, true, \"\xc3\xa9\\\"\\\\\\n\\t\\u0001\x7f\xe2\x80\xa8\"], \"a\": {}, "
            "\"c\": []}");
  options.indent = "  ";
  options.sort_keys = true;
  EXPECT_EQ(*PythonJsonDumps(*value, options),
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.5,\n    1e+20,\n    1e-07,\n    null,\n    true,\n"
            "    \"\xc3\xa9\\\"\\\\\\n\\t\\u0001\x7f\xe2\x80\xa8\"\n  ],\n  \"c\": []\n}");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(*PythonJsonDumps(Value::String("\xc3\xa9\xf0\x9f\x98\x80"), ascii), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(*PythonJsonDumps(Value::Float(HUGE_VAL), ascii), "Infinity");
  EXPECT_FALSE(PythonJsonDumps(Value(), ascii).ok());
}

TEST(JinjaJson, ContextConversionChecksItsInput) {
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  for (int i = 0; i < 1000; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_FALSE(ValueFromJson(deep).ok());
  EXPECT_FALSE(ValueFromJson(nlohmann::ordered_json(std::string("\xff"))).ok());
  EXPECT_FALSE(ValueFromJson(nlohmann::ordered_json(uint64_t{1} << 63)).ok());
  auto ordered = ValueFromJson(nlohmann::ordered_json::parse(R"({"z": 1, "a": 2})"));
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(*ToPythonRepr(*ordered), "{'z': 1, 'a': 2}");  // insertion order, as json.loads keeps it
}

TEST(JinjaUnicode, CaseMappingsAreCPythons) {
  EXPECT_EQ(PythonUpper("stra\xc3\x9f" "e \xef\xac\x81"), "STRASSE FI");  // ß and the fi ligature expand
  EXPECT_EQ(PythonLower("\xce\xa3\xce\x91\xce\xa3 \xce\xa3"), "\xcf\x83\xce\xb1\xcf\x82 \xcf\x83");  // final sigma
  EXPECT_EQ(PythonLower("\xc4\xb0"), "i\xcc\x87");  // İ lowers to i + combining dot
  EXPECT_EQ(PythonTitle("they're \xc7\x86x"), "They'Re \xc7\x85x");  // ǆ titlecases to ǅ
  EXPECT_EQ(PythonCapitalize("\xc7\x86X y"), "\xc7\x85x y");
  EXPECT_TRUE(PythonIsLower("abc1"));
  EXPECT_FALSE(PythonIsLower("123"));
  EXPECT_TRUE(PythonIsUpper("\xc3\x89T\xc3\x89"));
  EXPECT_EQ(CodePointCount("h\xc3\xa9llo \xf0\x9f\x98\x80"), 7u);
  EXPECT_TRUE(IsPythonSpace(0x3000));
  EXPECT_FALSE(IsPrintable(0x200B));
  EXPECT_TRUE(IsPrintable(0x1F600));
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));      // overlong
}

TEST(JinjaValue, EqualityAndHashingFollowPython) {
  EXPECT_TRUE(PythonEquals(Value::Int(1), Value::Float(1.0)));
  EXPECT_TRUE(PythonEquals(Value::Bool(true), Value::Int(1)));
  EXPECT_FALSE(PythonEquals(Value::List({Value::Int(1)}), Value::Tuple({Value::Int(1)})));
  EXPECT_TRUE(PythonEquals(Value(), Value()));
  EXPECT_EQ(*HashKey(Value::Int(1)), *HashKey(Value::Float(1.0)));
  EXPECT_EQ(*HashKey(Value::Bool(true)), *HashKey(Value::Int(1)));
  EXPECT_FALSE(HashKey(Value::List({})).ok());
  auto dict = Value::Dict({{Value::Int(1), Value::String("a")}, {Value::Bool(true), Value::String("b")}});
  ASSERT_TRUE(dict.ok());
  EXPECT_EQ(*ToPythonRepr(*dict), "{1: 'b'}");
  EXPECT_FALSE(*PythonCompare(Value::Float(std::nan("")), Value::Int(1)) == 0);
  EXPECT_FALSE(PythonCompare(Value::String("a"), Value::Int(1)).ok());
}

TEST(JinjaValue, DestroyingDeeplyNestedValuesDoesNotRecurse) {
  Value nested = Value::List({});
  for (int i = 0; i < 1'000'000; ++i) nested = Value::List({std::move(nested)});
  EXPECT_FALSE(ToPythonRepr(nested).ok());  // too deep to print, and freed without a stack overflow
}

}  // namespace
}  // namespace crossreg::jinja

// The bounded JSON parser (engine/io/bounded_json.h): the same document as nlohmann's
// parser, members in written order; every limit refused at the path where the parser
// met it, whatever the nesting (no recursion: 100,000 levels are one error, not a
// crash); duplicate member names refused; syntax errors and out-of-range numbers named
// by the path of the value being read.
#include "engine/io/bounded_json.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "gtest/gtest.h"

namespace crossreg {
namespace {

std::string Field(const absl::Status& s) { return ViolatedField(s).value_or("<none>"); }

TEST(BoundedJsonTest, ParsesWhatNlohmannParsesWithMembersInWrittenOrder) {
  const std::string text = R"({"z": 1, "a": [true, null, -2, 3.5, "x\u00e9"], "m": {"k": {}, "j": []}, "u": 18446744073709551615})";
  auto parsed = ParseBoundedJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->dump(), nlohmann::ordered_json::parse(text).dump());
  EXPECT_EQ(parsed->begin().key(), "z");
  EXPECT_TRUE((*parsed)["u"].is_number_unsigned());
  auto scalar = ParseBoundedJson("  42 ");
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(*scalar, 42);
}

TEST(BoundedJsonTest, NestingIsRefusedWhereItPassesTheLimitAtAnyDepth) {
  JsonLimits limits;
  limits.max_depth = 4;
  EXPECT_TRUE(ParseBoundedJson(R"({"a": {"b": [[1]]}})", limits).ok());
  const absl::Status five = ParseBoundedJson(R"({"a": {"b": [[[1]]]}})", limits).status();
  EXPECT_EQ(five.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Field(five), "a.b[0][0]");
  EXPECT_TRUE(absl::StrContains(five.message(), "nested deeper than 4 levels")) << five;
  // 100,000 levels with the default limit: refused at level 65, with a path cut short.
  const std::string deep = absl::StrCat(R"({"schema": )", std::string(100000, '['), std::string(100000, ']'), "}");
  const absl::Status refused = ParseBoundedJson(deep).status();
  EXPECT_TRUE(absl::StrContains(refused.message(), "nested deeper than 64 levels")) << refused.message().substr(0, 200);
  EXPECT_TRUE(absl::StartsWith(Field(refused), "schema[0][0]"));
  EXPECT_LT(refused.message().size(), 300u);
}

TEST(BoundedJsonTest, WideObjectsAndArraysAndDuplicatesAreRefusedByName) {
  JsonLimits limits;
  limits.max_object_members = 3;
  limits.max_array_elements = 2;
  EXPECT_TRUE(ParseBoundedJson(R"({"a": 1, "b": 2, "c": [1, 2]})", limits).ok());
  const absl::Status members = ParseBoundedJson(R"({"x": {"a": 1, "b": 2, "c": 3, "d": 4}})", limits).status();
  EXPECT_EQ(Field(members), "x");
  EXPECT_TRUE(absl::StrContains(members.message(), "more than 3 members")) << members;
  const absl::Status elements = ParseBoundedJson(R"({"a": {"b": [1, 2, 3]}})", limits).status();
  EXPECT_EQ(Field(elements), "a.b");
  EXPECT_TRUE(absl::StrContains(elements.message(), "more than 2 elements")) << elements;
  JsonLimits few_values;
  few_values.max_values = 5;
  const absl::Status values = ParseBoundedJson(R"([[1, 2], [3, 4]])", few_values).status();
  EXPECT_TRUE(absl::StrContains(values.message(), "more than 5 values")) << values;
  const absl::Status duplicate = ParseBoundedJson(R"({"logit_bias": {"5": 1, "5": 2}})").status();
  EXPECT_EQ(Field(duplicate), "logit_bias.5");
  EXPECT_TRUE(absl::StrContains(duplicate.message(), "duplicate member name")) << duplicate;
  // Keys that are not identifiers are quoted and cut in the path.
  const absl::Status odd = ParseBoundedJson(absl::StrCat(R"({")", std::string(100, 'k'), " \": 1, \"", std::string(100, 'k'),
                                                         " \": 2})"))
                               .status();
  EXPECT_TRUE(absl::StartsWith(Field(odd), "\"kkkk")) << Field(odd);
  EXPECT_TRUE(absl::EndsWith(Field(odd), "...")) << Field(odd);
}

TEST(BoundedJsonTest, SyntaxErrorsAndHugeNumbersNameTheValueBeingRead) {
  const absl::Status huge = ParseBoundedJson(R"({"temperature": 1e400})").status();
  EXPECT_EQ(Field(huge), "temperature");
  EXPECT_TRUE(absl::StrContains(huge.message(), "number out of range (1e400)")) << huge;
  const absl::Status broken = ParseBoundedJson(R"({"messages": [{"role": "user", "content": tru}]})").status();
  EXPECT_EQ(Field(broken), "messages[0].content");
  EXPECT_TRUE(absl::StrContains(broken.message(), "not valid JSON")) << broken;
  const absl::Status second = ParseBoundedJson(R"({"stop": ["a", 1, ]})").status();
  EXPECT_EQ(Field(second), "stop[2]");
  EXPECT_EQ(Field(ParseBoundedJson("").status()), "body");
  EXPECT_EQ(Field(ParseBoundedJson(R"({"a": 1} x)").status()), "body");
  // Under a root name every path starts with it.
  const absl::Status rooted = ParseBoundedJson(R"({"properties": {"a": [}})", {}, "json_schema").status();
  EXPECT_EQ(Field(rooted), "json_schema.properties.a[0]");
}

}  // namespace
}  // namespace crossreg

// Budgets: whatever the template, parsing and rendering end with text or an error, fast,
// without exhausting the stack or memory.
#include <chrono>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/jinja_template.h"

namespace crossreg::jinja {
namespace {

std::string Repeat(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

absl::StatusOr<std::string> RenderWithOptions(const std::string& source, const TemplateOptions& options = {}) {
  auto parsed = Template::Parse(source, options);
  if (!parsed.ok()) return parsed.status();
  return parsed->Render(nlohmann::ordered_json::parse(R"({"x": "text", "xs": [1, 2, 3]})"));
}

double SecondsToRender(const std::string& source, const TemplateOptions& options, absl::Status* status) {
  const auto start = std::chrono::steady_clock::now();
  *status = RenderWithOptions(source, options).status();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(JinjaLimits, DeepNestingIsAnErrorNotAStackOverflow) {
  const int n = 100000;
  const std::vector<std::string> deep = {
      "{{ " + Repeat("(", n) + "1" + Repeat(")", n) + " }}",
      "{{ " + Repeat("[", n) + Repeat("]", n) + " }}",
      "{{ x" + Repeat("|trim", n) + " }}",
      "{{ " + Repeat("not ", n) + "x }}",
      "{{ " + Repeat("-", n) + "1 }}",
      "{{ 1" + Repeat(" + 1", n) + " }}",
      "{{ x" + Repeat(".a", n) + " }}",
      "{{ x" + Repeat("()", n) + " }}",
      Repeat("{% if true %}", n) + Repeat("{% endif %}", n),
      Repeat("{% for i in xs %}", n) + Repeat("{% endfor %}", n),
  };
  for (const std::string& source : deep) {
    auto parsed = Template::Parse(source);
    ASSERT_FALSE(parsed.ok()) << source.substr(0, 40);
    EXPECT_NE(parsed.status().message().find("nests deeper than 200 levels"), std::string::npos) << parsed.status();
  }
  // Within the budget, deep templates work.
  EXPECT_EQ(*RenderWithOptions(Repeat("{% if true %}", 60) + "in" + Repeat("{% endif %}", 60)), "in");
  EXPECT_EQ(*RenderWithOptions("{{ " + Repeat("(", 50) + "7" + Repeat(")", 50) + " }}"), "7");
}

TEST(JinjaLimits, RunawayRecursionIsAnError) {
  auto rendered = RenderWithOptions("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}");
  ASSERT_FALSE(rendered.ok());
  EXPECT_NE(rendered.status().message().find("nests deeper than its budget"), std::string::npos) << rendered.status();
}

TEST(JinjaLimits, HugeLoopsFailFast) {
  absl::Status status;
  // The sandbox's own limit, as in jinja2.
  EXPECT_LT(SecondsToRender("{% for i in range(100000000) %}{% endfor %}", {}, &status), 1.0);
  EXPECT_EQ(status.message(), "line 1: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  // 10^10 iterations: the step budget stops them.
  TemplateOptions options;
  options.max_steps = 2'000'000;
  EXPECT_LT(SecondsToRender("{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
                            options, &status),
            5.0);
  EXPECT_EQ(status.message(), "line 1: the template ran past its budget of 2000000 evaluation steps");
}

TEST(JinjaLimits, DefaultStepBudgetEndsARunawayLoopInSeconds) {
  absl::Status status;
  const double seconds = SecondsToRender(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {}, &status);
  EXPECT_NE(status.message().find("evaluation steps"), std::string::npos) << status;
  EXPECT_LT(seconds, 60.0);
}

TEST(JinjaLimits, OutputAndStringsStayWithinTheByteBudget) {
  TemplateOptions options;
  options.max_output_bytes = 1000;
  auto rendered = RenderWithOptions("{% for i in range(1000) %}0123456789{% endfor %}", options);
  EXPECT_EQ(rendered.status().message(), "line 1: the output grew past its budget of 1000 bytes");
  rendered = RenderWithOptions("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                    options);
  EXPECT_EQ(rendered.status().message(), "line 1: the template built text over its budget of 1000 bytes");
  rendered = RenderWithOptions("{{ 'x' * 100000000000 }}", options);
  EXPECT_EQ(rendered.status().message(), "line 1: the template built text over its budget of 1000 bytes");
  rendered = RenderWithOptions("{% set big %}{% for i in range(1000) %}0123456789{% endfor %}{% endset %}", options);
  EXPECT_FALSE(rendered.ok());
}

TEST(JinjaLimits, CyclesAndDeepValuesAreSafe) {
  // A namespace that holds itself cannot print (Python shows {...}), and is freed.
  auto rendered = RenderWithOptions("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns.self.self is defined }}{{ ns }}");
  ASSERT_FALSE(rendered.ok());
  EXPECT_NE(rendered.status().message().find("nest too deeply"), std::string::npos) << rendered.status();
  // A list nested 100000 deep is built, measured and freed without recursion.
  EXPECT_EQ(*RenderWithOptions("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                    "{{ ns.x|length }}"),
            "1");
  EXPECT_EQ(*RenderWithOptions("{% macro m() %}{{ 1 }}{% endmacro %}{% set ns = namespace(m=m) %}{{ ns.m() }}"), "1");
}

TEST(JinjaLimits, ParsingIsLinearInTheSource) {
  // 400000 tokens on one line, then as many lines: each parses well within a second.
  for (const char* separator : {"", "\n"}) {
    const std::string source = Repeat(std::string("{{ x }}") + separator, 100000);
    const auto start = std::chrono::steady_clock::now();
    auto parsed = Template::Parse(source);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_LT(seconds, 2.0);
  }
}

}  // namespace
}  // namespace crossreg::jinja

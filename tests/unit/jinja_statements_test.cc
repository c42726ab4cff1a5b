// Statements: if, for (loop variables, filters, else, unpacking, break/continue), set and
// its scoping, namespace, block set, filter blocks, macros, with, generation, raw, globals.
// Each expected text is what Python's jinja2 3.1 renders for the template with
// kContext, configured as Hugging Face configures it (tests/chat/test_jinja_parity.py).
#include <string>
#include <vector>
#include <ctime>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/jinja_template.h"
#include "tests/testing/jinja_reference.h"

namespace crossreg::jinja {
namespace {

class JinjaStatementTest : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaStatementTest, RendersAsJinja2) {
  auto rendered = Render(GetParam().source);
  ASSERT_TRUE(rendered.ok()) << GetParam().source << "\n" << rendered.status();
  EXPECT_EQ(*rendered, GetParam().expected) << GetParam().source;
}

INSTANTIATE_TEST_SUITE_P(Jinja2Reference, JinjaStatementTest, ::testing::ValuesIn(std::vector<Case>{
    {R"J({% if i > 5 %}big{% elif i > 2 %}mid{% else %}small{% endif %})J", R"J(big)J"},
    {R"J({% if n %}a{% elif t %}b{% endif %})J", R"J(b)J"},
    {R"J({% if not add_generation_prompt is defined %}undefined{% endif %})J", R"J(undefined)J"},
    {R"J({% for x in xs %}{{ x }},{% endfor %})J", R"J(3,1,2,)J"},
    {R"J({% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %})J", R"J(1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;)J"},
    {R"J({% for x in xs %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('odd', 'even') }}|{{ loop.depth }}{{ loop.depth0 }}]{% endfor %})J", R"J([|1|odd|10][3|2|even|10][1||odd|10])J"},
    {R"J({% for x in [1, 1, 2] %}{{ loop.changed(x) }}{% endfor %})J", R"J(TrueFalseTrue)J"},
    {R"J({% for x in xs if x > 1 %}{{ x }}/{{ loop.length }} {% else %}none{% endfor %})J", R"J(3/2 2/2 )J"},
    {R"J({% for x in [] %}{{ x }}{% else %}empty{% endfor %})J", R"J(empty)J"},
    {R"J({% for x in xs if x > 10 %}{{ x }}{% else %}filtered away{% endfor %})J", R"J(filtered away)J"},
    {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %})J", R"J(b=2;a=1;)J"},
    {R"J({% for k, v in d|items %}{{ k }}={{ v }};{% endfor %})J", R"J(b=2;a=1;)J"},
    {R"J({% for k in d %}{{ k }}{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %})J", R"J(ba|[h][é])J"},
    {R"J({% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %})J", R"J(123)J"},
    {R"J({% for x in xs %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %})J", R"J(3)J"},
    {R"J({% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %})J", R"J(32)J"},
    {R"J({% for i in range(3) %}{% for j in range(2) %}{{ loop.index }}{% endfor %}|{{ loop.index }};{% endfor %})J", R"J(12|1;12|2;12|3;)J"},
    {R"J({% for i in range(3) %}{% for j in range(3) %}{% if j == 1 %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %})J", R"J(00 10 20 )J"},
    {R"J({% for m in messages[::-1] %}{{ m.role }} {% endfor %})J", R"J(assistant user system )J"},
    {R"J({% set a = 1 %}{% for x in xs %}{% set a = a + x %}{{ a }} {% endfor %}{{ a }})J", R"J(4 2 3 1)J"},
    {R"J({% for x in xs %}{{ y }}{% set y = x %}{% endfor %}[{{ y }}])J", R"J([])J"},
    {R"J({% if true %}{% set q = 3 %}{% endif %}{{ q }})J", R"J(3)J"},
    {R"J({% set ns = namespace(total=0, names='') %}{% for m in messages %}{% set ns.total = ns.total + 1 %}{% set ns.names = ns.names ~ m.role[0] %}{% endfor %}{{ ns.total }} {{ ns.names }})J", R"J(3 sua)J"},
    {R"J({% set ns = namespace() %}{% set ns.x = [1] %}{{ ns.x }} {{ ns.missing }} {{ ns }})J", R"J([1]  <Namespace {'x': [1]}>)J"},
    {R"J({% set ns = namespace(d) %}{{ ns.a }}{{ ns.b }})J", R"J(12)J"},
    {R"J({% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = 1, 2 %}{{ t }}|{% set x = 3 if false else 4 %}{{ x }})J", R"J(12|(1, 2)|4)J"},
    {R"J({% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}])J", R"J([inner 2])J"},
    {R"J({% set y | upper | replace('O', '0') %}shout {{ 'now' }}{% endset %}{{ y }})J", R"J(SH0UT N0W)J"},
    {R"J({% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter trim|title %}  two words  {% endfilter %})J", R"J(ABC D|Two Words)J"},
    {R"J({% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Bob') }} {{ greet('Al', 'Hi') }} {{ greet(greeting='Yo', name='Z') }} {{ greet() }}|{{ greet }})J", R"J(Hello, Bob! Hi, Al! Yo, Z! Hello, !|<Macro 'greet'>)J"},
    {R"J({% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, a=3) }}|{{ m() }})J", R"J((1, 2){'a': 3}|(){})J"},
    {R"J({% set x = 5 %}{% macro show() %}{{ x }}{% endmacro %}{% for x in [1, 2] %}{{ show() }}{% endfor %}{% set x = 6 %}{{ show() }})J", R"J(556)J"},
    {R"J({% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %})J", R"J(12)J"},
    {R"J({% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }})J", R"J(54321)J"},
    {R"J({% macro outer() %}{% macro inner() %}in{% endmacro %}[{{ inner() }}]{% endmacro %}{{ outer() }}{{ inner is defined }})J", R"J([in]False)J"},
    {R"J({% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('x') }})J", R"J(x!)J"},
    {R"J({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])J", R"J(3[])J"},
    {R"J({% generation %}gen {{ 1 }}{% set g = 1 %}{% endgeneration %}[{{ g }}])J", R"J(gen 1[])J"},
    {R"J({% print 1, 'two' %})J", R"J(1two)J"},
    {R"J({% raw %}{{ not rendered }} {% if %}{% endraw %})J", R"J({{ not rendered }} {% if %})J"},
    {R"J({% set j = joiner(' + ') %}{% for x in xs %}{{ j() }}{{ x }}{% endfor %})J", R"J(3 + 1 + 2)J"},
    {R"J({{ range(3)|list }}|{{ range(2, 8, 3)|list }}|{{ range(5, 0, -2)|list }}|{{ range(3) }}|{{ range(1, 9, 2) }})J", R"J([0, 1, 2]|[2, 5]|[5, 3, 1]|range(0, 3)|range(1, 9, 2))J"},
    {R"J({{ dict(a=1, b='x') }}|{{ dict({'z': 0}, y=1) }}|{{ dict([('k', 'v')]) }}|{{ namespace(x=1).x }})J", R"J({'a': 1, 'b': 'x'}|{'z': 0, 'y': 1}|{'k': 'v'}|1)J"},
    {R"J({{ dict(a=1, **{'b': 2}) }}|{{ range(*[1, 3])|list }}|{{ namespace(**{'q': 5}).q }})J", R"J({'a': 1, 'b': 2}|[1, 2]|5)J"},
    {R"J({% for m in messages %}{% if m.role == 'user' %}{% set ns_local = 1 %}{% endif %}{% endfor %}[{{ ns_local }}])J", R"J([])J"},
    {R"J({% set msgs = messages|selectattr('role', 'ne', 'system')|list %}{% for m in msgs %}{{ m.role }}:{{ m.content }};{% endfor %}
)J", R"J(user:Hi é;assistant:None;)J"},
}));

TEST(JinjaStatementErrors, ParseErrorsNameTheLineAndTheConstruct) {
  EXPECT_EQ(ErrorOf("{% for x in xs %}\n  {% include 'x' %}{% endfor %}"),
            "line 2, column 6: the 'include' tag is not supported");
  EXPECT_EQ(ErrorOf("{% call m() %}{% endcall %}"), "line 1, column 4: the 'call' tag is not supported");
  EXPECT_EQ(ErrorOf("{% extends 'base' %}"), "line 1, column 4: the 'extends' tag is not supported");
  EXPECT_EQ(ErrorOf("{% do xs %}"), "line 1, column 4: Encountered unknown tag 'do'.");
  EXPECT_EQ(ErrorOf("{% break %}"), "line 1, column 4: 'break' outside a for loop");
  EXPECT_EQ(ErrorOf("{% for x in xs %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
            "line 1, column 36: 'continue' outside a for loop");
  EXPECT_EQ(ErrorOf("{% for x in xs recursive %}{% endfor %}"), "line 1, column 16: recursive for loops are not supported");
  EXPECT_EQ(ErrorOf("a\n{% if true %}\nb"),
            "line 3, column 2: unexpected end of template: expected 'elif' or 'else' or 'endif' to close the 'if' tag of line 2");
  EXPECT_EQ(ErrorOf("{% if true %}{% endfor %}"), "line 1, column 17: Encountered unknown tag 'endfor'.");
  EXPECT_EQ(ErrorOf("{% macro m(a=1, b) %}{% endmacro %}"), "line 1, column 18: non-default argument follows default argument");
  EXPECT_EQ(ErrorOf("{% set %}"), "line 1, column 8: expected an assignment target, got '%}'");
  EXPECT_EQ(ErrorOf("{% set true = 1 %}"), "line 1, column 8: can't assign to 'const'");
}

TEST(JinjaStatementErrors, RenderErrorsNameTheLine) {
  EXPECT_EQ(ErrorOf("line1\n{% set x = 1 %}{% set x.y = 2 %}"), "line 2: cannot assign attribute on non-namespace object");
  EXPECT_EQ(ErrorOf("{% macro m(a) %}{% endmacro %}\n{{ m(1, 2) }}"), "line 2: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(ErrorOf("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"), "line 1: macro 'm' takes no keyword argument 'b'");
  EXPECT_EQ(ErrorOf("{% macro m(a) %}{% endmacro %}{{ m(1, a=1) }}"), "line 1: macro 'm' got multiple values for argument 'a'");
  EXPECT_EQ(ErrorOf("{% for a, b in [[1]] %}{% endfor %}"), "line 1: not enough values to unpack (expected 2, got 1)");
  EXPECT_EQ(ErrorOf("{% set a, b = 1, 2, 3 %}"), "line 1: too many values to unpack (expected 2)");
  EXPECT_EQ(ErrorOf("{% for x in n %}{% endfor %}"), "line 1: 'NoneType' object is not iterable");
  EXPECT_EQ(ErrorOf("{{ range(1, 2, 0) }}"), "line 1: range() arg 3 must not be zero");
  // An error inside a macro names the macro's line, not the call's.
  EXPECT_EQ(ErrorOf("{% macro m() %}\n{{ 1 / 0 }}{% endmacro %}\n{{ m() }}"), "line 2: division by zero");
}

TEST(JinjaStatementErrors, RaiseExceptionGivesItsMessage) {
  EXPECT_EQ(ErrorOf("\n\n{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"),
            "line 3: Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(ErrorOf("{% if messages|length > 1 %}{{ raise_exception('Only ' ~ 1 ~ ' message') }}{% endif %}"),
            "line 1: Only 1 message");
}

TEST(JinjaStatementTest, StrftimeNowFormatsTheLocalTimeNow) {
  const auto format = [](const char* spec) {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[64];
    return std::string(buffer, std::strftime(buffer, sizeof buffer, spec, &local));
  };
  const std::string before = format("%d %b %Y");
  auto rendered = Render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%z%Z') }}");
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  const std::string after = format("%d %b %Y");
  EXPECT_TRUE(*rendered == before + "|" || *rendered == after + "|") << *rendered;  // a naive datetime has no zone
}

TEST(JinjaStatementTest, ContextMustBeAJsonObject) {
  auto parsed = Template::Parse("x");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->Render(nlohmann::ordered_json::array()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed->Render(nlohmann::ordered_json::parse(R"({"bad": "\xff"})", nullptr, false)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JinjaStatementTest, OneParsedTemplateRendersOnManyThreads) {
  auto parsed = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% macro r(x) %}[{{ x }}]{% endmacro %}"
      "{{ r(m.content) }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Template shared = *parsed;  // copies share the parsed program
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      nlohmann::ordered_json context;
      for (int k = 0; k <= t; ++k) context["messages"].push_back({{"content", std::to_string(t)}});
      std::string expected;
      for (int k = 0; k <= t; ++k) expected += "[" + std::to_string(t) + "]";
      expected += std::to_string(t + 1);
      for (int i = 0; i < 200; ++i) {
        auto out = shared.Render(context);
        if (!out.ok() || *out != expected) ++wrong[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace crossreg::jinja

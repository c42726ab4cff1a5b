// Whitespace as Hugging Face's jinja2 settings leave it: trim_blocks, lstrip_blocks, the -
// and + controls on every tag kind, comments and raw blocks.
// Each expected text is what Python's jinja2 3.1 renders for the template with
// kContext, configured as Hugging Face configures it (tests/chat/test_jinja_parity.py).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/chat/jinja_template.h"
#include "tests/testing/jinja_reference.h"

namespace crossreg::jinja {
namespace {

class JinjaWhitespaceTest : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaWhitespaceTest, RendersAsJinja2) {
  auto rendered = Render(GetParam().source);
  ASSERT_TRUE(rendered.ok()) << GetParam().source << "\n" << rendered.status();
  EXPECT_EQ(*rendered, GetParam().expected) << GetParam().source;
}

INSTANTIATE_TEST_SUITE_P(Jinja2Reference, JinjaWhitespaceTest, ::testing::ValuesIn(std::vector<Case>{
    {R"J(<ul>
    {% for x in xs %}
    <li>{{ x }}</li>
    {% endfor %}
</ul>)J", R"J(<ul>
    <li>3</li>
    <li>1</li>
    <li>2</li>
</ul>)J"},
    {R"J({% for m in messages %}
{% if m.role == 'user' %}
User: {{ m.content }}
{% else %}
Other: {{ m.role }}
{% endif %}
{% endfor %}
end)J", R"J(Other: system
User: Hi é
Other: assistant
end)J"},
    {R"J(  {%- if true %}
 a
  {%+ if true %}b{% endif %}
	{% if true %}tab{% endif %}
{% if true +%}
plus-end
{% endif %}
{% endif %})J", R"J( a
  btab
plus-end
)J"},
    {R"J(x {# c1 #}
  {# c2 #}
y {#- c3 -#}   z
{#+ c4 +#}
w)J", R"J(x yz

w)J"},
    {R"J({% raw %}
  {{ raw }}
{% endraw %}
  {% raw -%}   lead {%- endraw %})J", R"J(
  {{ raw }}
lead)J"},
    {R"J(a
   {{- 'b' }}
c {{ 'd' -}}

   e)J", R"J(ab
c de)J"},
    {R"J(line1
{% set x = 1 %}
line2
{%- set y = 2 -%}
line3
)J", R"J(line1
line2line3)J"},
    {R"J({{ "a" }}
{{ "b" }}
)J", R"J(a
b)J"},
    {R"J( {% if true %}x{% endif %} )J", R"J(x )J"},
    {R"J({% if true %}   
x{% endif %})J", R"J(   
x)J"},
    {R"J(	  {% if true %}
tab-space
	  {% endif %})J", R"J(tab-space
)J"},
    {R"J({% macro m() %}
  inside
{% endmacro %}
[{{ m() }}])J", R"J([  inside
])J"},
    {R"J(  {{ 'var' }}  {% if true %}blk{% endif %})J", R"J(  var  blk)J"},
    {R"J({%- for x in [1,2] -%}
  {{ x }}
{%- endfor %})J", R"J(12)J"},
    {R"J(a {% if false %} b {% else %} c {% endif %} d)J", R"J(a  c  d)J"},
    {R"J({{ 1 }}{# a #}{{ 2 }}
  {# b #}  {{ 3 }})J", R"J(12
  3)J"},
    {R"J({% for i in range(3) %}
  {%- if i == 1 %}{% continue %}{% endif %}
  item {{ i }}
{% endfor %})J", R"J(  item 0
  item 2
)J"},
    {R"J({% for i in range(3) -%}
{{ i }}
{%- endfor +%}
done)J", R"J(012
done)J"},
    {R"J({%- set a = 1 -%}

   {{- a -}}

{%- set b = 2 %}
   {{ b }})J", R"J(1   2)J"},
    {R"J(text with { braces } and {{ '{{' }} and %} and #} and {{ '}}' }})J", R"J(text with { braces } and {{ and %} and #} and }})J"},
    {R"J({{ {'a': {'b': 1}} }}|{{ [{'x': [1]}] }}|{% set d2 = {'k': {'n': 1}} %}{{ d2.k.n }})J", R"J({'a': {'b': 1}}|[{'x': [1]}]|1)J"},
    {R"J({{+ 'plus sign eaten' }}|{{- '|' }}
)J", R"J(plus sign eaten||)J"},
}));

TEST(JinjaWhitespaceTest, NewlinesAreNormalizedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(*Render("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(*Render("x\n\n"), "x\n");
  EXPECT_EQ(*Render("{% if true %}\r\n  y\r\n{% endif %}\r\n"), "  y\n");
  EXPECT_EQ(*Render("{{ \"l1\r\nl2\" }}"), "l1\nl2");
}

TEST(JinjaWhitespaceTest, OptionsTurnTrimAndLstripOff) {
  TemplateOptions options;
  options.trim_blocks = false;
  options.lstrip_blocks = false;
  auto parsed = Template::Parse("  {% if true %}\nx\n  {% endif %}\n  {# c #}\ny", options);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed->Render(nlohmann::ordered_json::object()), "  \nx\n  \n  \ny");  // jinja2's defaults
}

TEST(JinjaLexerErrors, NameTheLineAndColumn) {
  EXPECT_EQ(ErrorOf("{{ 'x' }}\n  {{ 'unterminated }}"), "line 2, column 6: unexpected char \"'\" (an unterminated string)");
  EXPECT_EQ(ErrorOf("a\n{# no end"), "line 2, column 1: Missing end of comment tag");
  EXPECT_EQ(ErrorOf("{% raw %}x"), "line 1, column 1: Missing end of raw directive");
  EXPECT_EQ(ErrorOf("{{ (1 }}"), "line 1, column 7: unexpected '}', expected ')'");
  EXPECT_EQ(ErrorOf("{{ 1 ]] }}"), "line 1, column 6: unexpected ']'");
  EXPECT_EQ(ErrorOf("é {{ x ! }}"), "line 1, column 8: unexpected char '!'");  // columns count characters
  EXPECT_EQ(ErrorOf("{{ 99999999999999999999 }}"), "line 1, column 4: an integer literal beyond 64 bits is not supported");
  EXPECT_EQ(ErrorOf("{{ '\\N{EM DASH}' }}"), "line 1, column 4: \\N{...} escapes in string literals are not supported");
  EXPECT_EQ(ErrorOf("{{ '\\x4' }}"), "line 1, column 4: truncated \\xXX escape");
  EXPECT_EQ(ErrorOf("{{ 1 +"), "line 1, column 7: unexpected end of template");
  EXPECT_EQ(ErrorOf(std::string("{{ 'a' }}\xff")), "line 1, column 1: the template is not valid UTF-8");
}

}  // namespace
}  // namespace crossreg::jinja

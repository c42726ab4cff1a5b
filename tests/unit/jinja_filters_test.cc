// Filters, with Hugging Face's tojson (json.dumps with ensure_ascii=False).
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

class JinjaFilterTest : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaFilterTest, RendersAsJinja2) {
  auto rendered = Render(GetParam().source);
  ASSERT_TRUE(rendered.ok()) << GetParam().source << "\n" << rendered.status();
  EXPECT_EQ(*rendered, GetParam().expected) << GetParam().source;
}

INSTANTIATE_TEST_SUITE_P(Jinja2Reference, JinjaFilterTest, ::testing::ValuesIn(std::vector<Case>{
    {R"J({{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ none|string }}|{{ 5|string }}|{{ 1.0|string }}|{{ xs|string }}|{{ undefined_x|string }})J", R"J(x|a|None|5|1.0|[3, 1, 2]|)J"},
    {R"J({{ '42'|int }}|{{ ' 42 '|int }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(3) }}|{{ '0x1f'|int(0, 16) }}|{{ '1_000'|int }}|{{ 4.7|int }}|{{ -4.7|int }}|{{ true|int }}|{{ none|int }}|{{ [1]|int(9) }})J", R"J(42|42|4|0|3|31|1000|4|-4|1|0|9)J"},
    {R"J({{ '1.5'|float }}|{{ 'x'|float }}|{{ 3|float }}|{{ ' -2e3 '|float }}|{{ 'inf'|float }}|{{ none|float(1.5) }})J", R"J(1.5|0.0|3.0|-2000.0|inf|1.5)J"},
    {R"J({{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 2.5|round(method='floor') }}|{{ 2.1|round(method='ceil') }}|{{ 7|round }}|{{ 1234|round(-2) }}|{{ 1250|round(-2) }}|{{ -3|abs }}|{{ -2.5|abs }})J", R"J(2.0|4.0|2.67|2.0|3.0|7|1200|1200|3|2.5)J"},
    {R"J({{ s|upper }}|{{ s|lower }}|{{ u|upper }}|{{ u|title }}|{{ u|capitalize }}|{{ "hello-world foo(bar) <x>"|title }}|{{ "hELLO wORLD"|capitalize }}|{{ 'ΣΑΣ'|lower }}|{{ 'aΣ b'|lower }}|{{ 'Σ'|lower }}|{{ 'ǆa'|capitalize }}|{{ "they're bill's"|title }})J", R"J(HELLO WORLD|hello world|HÉLLO WÖRLD ΣΑΣ|Héllo Wörld Σας|Héllo wörld σας|Hello-World Foo(Bar) <X>|Hello world|σας|aς b|σ|ǅa|They're Bill's)J"},
    {R"J({{ xs|sort }}|{{ xs|sort(reverse=true) }}|{{ ['b','A','a','B']|sort }}|{{ ['b','A','a','B']|sort(case_sensitive=true) }}|{{ [3, 1.5, true]|sort }}|{{ messages|sort(attribute='role')|map(attribute='role')|list }}|{{ [{'a': 2, 'b': 1}, {'a': 1, 'b': 2}, {'a': 1, 'b': 1}]|sort(attribute='a,b') }})J", R"J([1, 2, 3]|[3, 2, 1]|['A', 'a', 'b', 'B']|['A', 'B', 'a', 'b']|[True, 1.5, 3]|['assistant', 'system', 'user']|[{'a': 1, 'b': 1}, {'a': 1, 'b': 2}, {'a': 2, 'b': 1}])J"},
    {R"J({{ xs|max }}|{{ xs|min }}|{{ ['b', 'A']|max }}|{{ []|max }}|{{ [{'n': 2}, {'n': 5}]|max(attribute='n') }}|{{ xs|sum }}|{{ [1.5, 2]|sum }}|{{ [[1], [2]]|sum(start=[]) }}|{{ [{'n': 2}, {'n': 5}]|sum(attribute='n') }})J", R"J(3|1|b||{'n': 5}|6|3.5|[1, 2]|7)J"},
    {R"J({{ xs|first }}|{{ xs|last }}|{{ 'abc'|first }}|{{ 'abc'|last }}|{{ {'x': 1, 'y': 2}|first }}|{{ {'x': 1, 'y': 2}|last }}|{{ []|first }}|{{ ''|last }}|{{ undefined_x|first }})J", R"J(3|2|a|c|x|y|||)J"},
    {R"J({{ xs|length }}|{{ s|length }}|{{ u|count }}|{{ d|length }}|{{ undefined_x|length }}|{{ xs|reverse|list }}|{{ 'abc'|reverse }}|{{ xs|list }}|{{ s|list }}|{{ d|list }}|{{ undefined_x|list }})J", R"J(3|11|15|2|0|[2, 1, 3]|cba|[3, 1, 2]|['H', 'e', 'l', 'l', 'o', ' ', 'W', 'o', 'r', 'l', 'd']|['b', 'a']|[])J"},
    {R"J({{ [1,2,1,3,2]|unique|list }}|{{ ['a', 'A', 'b']|unique|list }}|{{ ['a', 'A', 'b']|unique(case_sensitive=true)|list }}|{{ [{'x': 1}, {'x': 1}]|unique(attribute='x')|list }})J", R"J([1, 2, 3]|['a', 'b']|['a', 'A', 'b']|[{'x': 1}])J"},
    {R"J({{ {'b': 2, 'a': 1}|dictsort }}|{{ {'b': 2, 'a': 1}|dictsort(by='value') }}|{{ {'b': 2, 'A': 1, 'a': 3}|dictsort }}|{{ {'b': 2, 'A': 1, 'a': 3}|dictsort(true) }}|{{ d|dictsort(reverse=true) }}|{{ d|items|list }})J", R"J([('a', 1), ('b', 2)]|[('a', 1), ('b', 2)]|[('A', 1), ('a', 3), ('b', 2)]|[('A', 1), ('a', 3), ('b', 2)]|[('b', 2), ('a', 1)]|[('b', 2), ('a', 1)])J"},
    {R"J({{ messages|selectattr('role', 'equalto', 'user')|list }}|{{ messages|map(attribute='role')|list }}|{{ messages|rejectattr('tool_calls')|list|length }}|{{ messages|selectattr('tool_calls', 'defined')|list|length }}|{{ messages|map(attribute='missing', default='D')|list }})J", R"J([{'role': 'user', 'content': 'Hi é'}]|['system', 'user', 'assistant']|2|1|['D', 'D', 'D'])J"},
    {R"J({{ xs|select('odd')|list }}|{{ xs|reject('odd')|list }}|{{ xs|select('gt', 1)|list }}|{{ xs|select('divisibleby', 3)|list }}|{{ [1, 0, none, 'a']|select|list }}|{{ [1, 0, none, 'a']|reject|list }}|{{ messages|selectattr('role', 'in', ['user', 'system'])|map(attribute='role')|join(',') }})J", R"J([3, 1]|[2]|[3, 2]|[3]|[1, 'a']|[0, None]|system,user)J"},
    {R"J({{ xs|map('string')|join(',') }}|{{ ['a', 'B']|map('upper')|list }}|{{ [' a ']|map('trim')|list }}|{{ [[1, 2]]|map('join', '-')|list }}|{{ [1, 2, 3]|batch(2)|map('sum')|list }}|{{ [1,2,3,4,5]|batch(2)|list }}|{{ [1,2,3]|batch(2, 0)|list }})J", R"J(3,1,2|['A', 'B']|['a']|['1-2']|[3, 3]|[[1, 2], [3, 4], [5]]|[[1, 2], [3, 0]])J"},
    {R"J({{ xs|join(', ') }}|{{ messages|join(',', attribute='role') }}|{{ [1, none, 'a']|join('-') }}|{{ xs|join }}|{{ undefined_x|join(',') }})J", R"J(3, 1, 2|system,user,assistant|1-None-a|312|)J"},
    {R"J({{ d|tojson }}|{{ messages|tojson }}|{{ [1.5, 1e20, 1e-7, 'é"\\\n\t\x01\x7f\u2028'] | tojson }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ {1: 2, true: 'b', none: 3, 1.5: 4}|tojson }}|{{ (1, 2)|tojson }}|{{ -0.0|tojson }}|{{ 1e100|tojson }})J", R"J({"b": 2, "a": 1}|[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi é"}, {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [1.5, "x"]}}}]}]|[1.5, 1e+20, 1e-07, "é\"\\\n\t\u0001 "]|"\u00e9\ud83d\ude00"|{"1": "b", "null": 3, "1.5": 4}|[1, 2]|-0.0|1e+100)J"},
    {R"J({{ d|tojson(indent=2) }}|{{ [[]]|tojson(indent=2) }}|{{ {'a': {}}|tojson(indent=2) }}|{{ d|tojson(indent='\t') }}|{{ [1, 2]|tojson(indent=0) }}|{{ {'b': 1, 'a': [true, none]}|tojson(indent=4, sort_keys=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(indent=1, separators=(';', '=')) }})J", R"J({
  "b": 2,
  "a": 1
}|[
  []
]|{
  "a": {}
}|{
	"b": 2,
	"a": 1
}|[
1,
2
]|{
    "a": [
        true,
        null
    ],
    "b": 1
}|{"b":2,"a":1}|{
 "b"=2;
 "a"=1
})J"},
    {R"J({{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'x\ny'|indent('>>') }}|{{ ''|indent }})J", R"J(a
    b

    c|  a
  b|a
  
  b|x
>>y|)J"},
    {R"J({{ undefined_x|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|default('d') }}|{{ undefined_x|d('e') }}|{{ false|d('f', boolean=true) }})J", R"J(d||d|None|e|f)J"},
    {R"J({{ "%s"|format(1) }}|{{ "%s-%s"|format('a', 'b') }}|{{ "%(k)s"|format(k='v') }}|{{ 'x'|replace('x', 'y') }}|{{ 'aaa'|replace('a', 'b', 1) }}|{{ 'a b c'|wordcount }}|{{ 'hi'|center(6) }}|{{ s|attr('upper') is callable }}|{{ d|attr('a') }})J", R"J(1|a-b|v|y|baa|3|  hi  |True|)J"},
    {R"J({{ '<b>'|safe + '<i>' }}|{{ '<i>' + '<b>'|safe }}|{{ '<b>'|escape }}|{{ '<x>'|e|length }}|{{ 'a' ~ '<b>'|safe }}|{{ '<x>'|safe|string }}|{{ ('<x>'|safe).upper() }}
)J", R"J(<b>&lt;i&gt;|&lt;i&gt;<b>|&lt;b&gt;|9|a<b>|<x>|<X>)J"},
}));

TEST(JinjaFilterErrors, UnknownAndUnsupportedFiltersFailAtParse) {
  EXPECT_EQ(ErrorOf("{{ s }}\n{{ s|wordwrap(5) }}"), "line 2, column 6: the filter 'wordwrap' is not supported");
  EXPECT_EQ(ErrorOf("{{ xs|groupby('x') }}"), "line 1, column 7: the filter 'groupby' is not supported");
  EXPECT_EQ(ErrorOf("{{ s|nosuch }}"), "line 1, column 6: No filter named 'nosuch'.");
  EXPECT_EQ(ErrorOf("{{ s is nosuch }}"), "line 1, column 9: No test named 'nosuch'.");
  EXPECT_EQ(ErrorOf("{% filter nosuch %}x{% endfilter %}"), "line 1, column 11: No filter named 'nosuch'.");
}

TEST(JinjaFilterErrors, FailAsJinja2Does) {
  EXPECT_EQ(ErrorOf("{{ undefined_x|tojson }}"), "line 1: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(ErrorOf("{{ d.items()|tojson }}"), "line 1: Object of type dict_items is not JSON serializable");
  EXPECT_EQ(ErrorOf("{{ {(1, 2): 3}|tojson }}"), "line 1: keys must be str, int, float, bool or None, not tuple");
  EXPECT_EQ(ErrorOf("{{ xs|select('odd')|length }}"), "line 1: object of type 'generator' has no len()");
  EXPECT_EQ(ErrorOf("{{ 5|length }}"), "line 1: object of type 'int' has no len()");
  EXPECT_EQ(ErrorOf("{{ 5|first }}"), "line 1: 'int' object is not iterable");
  EXPECT_EQ(ErrorOf("{{ [[1], [1]]|unique|list }}"), "line 1: unhashable type: 'list'");
  EXPECT_EQ(ErrorOf("{{ undefined_x|int }}"), "line 1: 'undefined_x' is undefined");
  EXPECT_EQ(ErrorOf("{{ undefined_x|indent }}"), "line 1: 'undefined_x' is undefined");
  EXPECT_EQ(ErrorOf("{{ 'a'|replace('a') }}"), "line 1: replace() missing required argument 'new'");
  EXPECT_EQ(ErrorOf("{{ s|trim(1, 2) }}"), "line 1: trim() takes at most 1 argument (2 given)");
  EXPECT_EQ(ErrorOf("{{ s|upper(x=1) }}"), "line 1: upper() got an unexpected keyword argument 'x'");
  EXPECT_EQ(ErrorOf("{{ xs|map|list }}"), "line 1: map requires a filter argument");
  EXPECT_EQ(ErrorOf("{{ d|dictsort(by='x') }}"), "line 1: You can only sort by either \"key\" or \"value\"");
  EXPECT_EQ(ErrorOf("{{ [1, 'a']|sort }}"), "line 1: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(ErrorOf("{{ xs|select('odd')|last }}"), "line 1: 'generator' object is not reversible");
}

}  // namespace
}  // namespace crossreg::jinja

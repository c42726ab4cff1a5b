// Expressions: literals and escapes, Python arithmetic and float printing, repr of
// containers, comparisons and `in`, attribute, item and slice access, tests, str methods
// and % / format.
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

class JinjaExpressionTest : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaExpressionTest, RendersAsJinja2) {
  auto rendered = Render(GetParam().source);
  ASSERT_TRUE(rendered.ok()) << GetParam().source << "\n" << rendered.status();
  EXPECT_EQ(*rendered, GetParam().expected) << GetParam().source;
}

INSTANTIATE_TEST_SUITE_P(Jinja2Reference, JinjaExpressionTest, ::testing::ValuesIn(std::vector<Case>{
    {R"J({{ 1 + 2 }}|{{ 7 / 2 }}|{{ 6 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ 5.5 % -2 }})J", R"J(3|3.5|3.0|3|-4|2|-2|1024|0.5|3.0|0.5|-0.5)J"},
    {R"J({{ -1|abs }}|{{ -2**2 }}|{{ 2**3**2 }}|{{ not 1 == 2 }}|{{ 1 + 2 * 3 - 4 / 2 }}|{{ (1 + 2) * 3 }}|{{ 10 % 3 * 2 }}|{{ true + true }}|{{ -f }}|{{ +i }})J", R"J(1|4|64|True|5.0|9|2|2|-1.5|7)J"},
    {R"J({{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 1.0 }}|{{ -0.0 }}|{{ 1/3 }}|{{ 2.5e-7 }}|{{ 100.0 / 3 }}|{{ 2 ** 0.5 }}|{{ 123456789.123456789 }}|{{ 1.7976931348623157e308 }}|{{ 5e-324 }}|{{ 12345678901234567890.0 }})J", R"J(0.30000000000000004|1e+20|1e+16|1000000000000000.0|0.0001|1e-05|1.0|-0.0|0.3333333333333333|2.5e-07|33.333333333333336|1.4142135623730951|123456789.12345679|1.7976931348623157e+308|5e-324|1.2345678901234567e+19)J"},
    {R"J({{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1_000 }}|{{ 1_0.5 }}|{{ 1e3 }}|{{ 12.5e-1 }}|{{ 9223372036854775807 }}|{{ -9223372036854775807 - 1 }})J", R"J(31|15|5|1000|10.5|1000.0|1.25|9223372036854775807|-9223372036854775808)J"},
    {R"J({{ 'a' ~ 1 ~ none ~ true ~ undefined_x ~ 1.0 }}|{{ 'ab' * 3 }}|{{ 2 * 'ab' }}|{{ [1] * 2 }}|{{ 'x' + 'y' }}|{{ [1] + [2] }}|{{ (1,) + (2,) }}|{{ 'ab' * 0 }})J", R"J(a1NoneTrue1.0|ababab|abab|[1, 1]|xy|[1, 2]|(1, 2)|)J"},
    {R"J({{ [1, 'a', none, true, 1.5, {'k': 'v'}, (1,), (1, 2), ()] }}|{{ (1, 2) }}|{{ 1, 2 }})J", R"J([1, 'a', None, True, 1.5, {'k': 'v'}, (1,), (1, 2), ()]|(1, 2)|(1, 2))J"},
    {R"J({{ "it's" }}|{{ ["it's", 'say "x"', 'both \'"', 'back\\slash', 'nl\n', 'tab\t', '\x01', 'é', '\u200b', '\xa0', '😀', '\x7f', '\u2028'] }})J", R"J(it's|["it's", 'say "x"', 'both \'"', 'back\\slash', 'nl\n', 'tab\t', '\x01', 'é', '\u200b', '\xa0', '😀', '\x7f', '\u2028'])J"},
    {R"J({{ "\x41\101\u0042\U00000043\q\'\"" }}|{{ 'a' 'b' "c" }}|{{ 'line\
continued' }}|{{ '\é' }})J", R"J(AABC\q'"|abc|linecontinued|\xe9)J"},
    {R"J({{ d }}|{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}|{{ {1: 'a', 1.0: 'b', true: 'c'} }}|{{ {'a': 1, 'a': 2} }}|{{ {} }}|{{ [] }})J", R"J({'b': 2, 'a': 1}|dict_items([('b', 2), ('a', 1)])|dict_keys(['b', 'a'])|dict_values([2, 1])|{1: 'c'}|{'a': 2}|{}|[])J"},
    {R"J({{ s[0] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[100] }}|{{ u[1] }}|{{ u[::-1] }}|{{ u|length }}|{{ xs[-1] }}|{{ xs[1:] }}|{{ xs[5:] }}|{{ xs[n:] }}|{{ xs[:-1] }}|{{ xs[::-2] }}|{{ range(5)[::-1] }}|{{ range(5)[1:3]|list }})J", R"J(H|d|el|dlroW olleH|HloWrd||é|ΣΑΣ dlröw olléh|15|2|[1, 2]|[]|[3, 1, 2]|[3, 1]|[2, 3]|range(4, -1, -1)|[1, 2])J"},
    {R"J({{ messages[0].content }}|{{ messages.0.role }}|{{ messages[1]['role'] }}|{{ messages[0].missing }}|{{ d.get('a') }}|{{ d.get('z', 'dflt') }}|{{ d['a'] }}|{{ d.a }}|{{ s.missing }}|{{ n.x }}|{{ n[0] }}|{{ i[0] }}|{{ xs['0'] }})J", R"J(Be brief.|system|user||1|dflt|1|1|||||)J"},
    {R"J({{ messages[2].tool_calls[0].function.arguments }}|{{ messages[2].tool_calls[0].function.arguments|string }}|{{ messages[2].tool_calls[0].function.arguments|tojson }}|{{ messages[2].content }}|{{ messages[2].content is none }})J", R"J({'a': 1, 'b': [1.5, 'x']}|{'a': 1, 'b': [1.5, 'x']}|{"a": 1, "b": [1.5, "x"]}|None|True)J"},
    {R"J({% if 1 in xs %}in{% endif %}|{% if 'ell' in s %}sub{% endif %}|{% if 'a' in d %}key{% endif %}|{% if 9 not in xs %}notin{% endif %}|{{ 'x' in undefined_x }}|{{ 'a' in d.keys() }}|{{ ('a', 1) in d.items() }})J", R"J(in|sub|key|notin|False|True|True)J"},
    {R"J({{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' < 'b' }}|{{ 'é' > 'z' }}|{{ [1,2] < [1,3] }}|{{ (1, 2) == (1, 2) }}|{{ [1] == (1,) }}|{{ 1 == 1.0 }}|{{ true == 1 }}|{{ none == none }}|{{ undefined_x == undefined_y }}|{{ {'a': 1} == {'a': 1.0} }}|{{ 1.5 >= 1 }}|{{ 'a' != 'b' }})J", R"J(True|False|True|True|True|True|False|True|True|True|True|True|True|True)J"},
    {R"J({{ 'yes' if t else 'no' }}|{{ 'yes' if n else 'no' }}|{{ 'yes' if n }}|{{ t and 'x' }}|{{ n or 'y' }}|{{ not t }}|{{ n and 1 }}|{{ 0 or none }}|{{ 3 if 1 > 2 else 4 if 2 > 3 else 5 }})J", R"J(yes|no||x|y|False|None|None|5)J"},
    {R"J({{ 'x' ~ xs|length ~ 'y' }}|{{ 'a' + s|upper }}|{{ '<x>' ~ messages|length }}|{{ messages|length - 1 }}|{{ (messages|length - 1) - 0 }})J", R"J(x3y|aHELLO WORLD|<x>3|2|2)J"},
    {R"J({{ n is none }}|{{ n is not none }}|{{ s is string }}|{{ i is number }}|{{ f is float }}|{{ i is integer }}|{{ t is boolean }}|{{ d is mapping }}|{{ xs is iterable }}|{{ xs is sequence }}|{{ i is odd }}|{{ i is even }}|{{ i is divisibleby 7 }}|{{ undefined_x is defined }}|{{ s is lower }}|{{ 'ABC' is upper }})J", R"J(True|False|True|True|True|True|True|True|True|True|True|False|True|False|False|True)J"},
    {R"J({{ t is true }}|{{ 'a' is in ['a'] }}|{{ i is eq 7 }}|{{ i is equalto(7) }}|{{ i is ne 7 }}|{{ range is callable }}|{{ d is sequence }}|{{ undefined_x is iterable }}|{{ t is number }}|{{ t is integer }}|{{ 1.0 is integer }}|{{ i is gt 3 }}|{{ i is lt(3) }}|{{ n is sameas none }}|{{ 'trim' is filter }}|{{ 'odd' is test }}|{{ s is escaped }})J", R"J(True|True|True|True|False|True|True|True|True|False|False|True|False|True|True|True|False)J"},
    {R"J({{ s.upper() }}|{{ s.lower() }}|{{ u.upper() }}|{{ u.title() }}|{{ 'ß'.upper() }}|{{ 'ΣΑΣ ΣΑΣ'.lower() }}|{{ 'ﬁ'.upper() }}|{{ 'ǆ'.title() }}|{{ "they're bill's".title() }}|{{ 'İ'.lower()|length }}|{{ 'hELLO wORLD'.capitalize() }})J", R"J(HELLO WORLD|hello world|HÉLLO WÖRLD ΣΑΣ|Héllo Wörld Σας|SS|σας σας|FI|ǅ|They'Re Bill'S|2|Hello world)J"},
    {R"J({{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ '\u3000a\xa0'.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b c '.split() }}|{{ 'a b c'.split(None, 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ ' a b c '.rsplit(None, 1) }}|{{ ''.split() }}|{{ ''.split(',') }}|{{ 'a  b'.split(' ') }})J", R"J(a b|a|a|a|a|['a', 'b', '', 'c']|['a', 'b', 'c']|['a', 'b c']|['a,b', 'c']|[' a b', 'c']|[]|['']|['a', '', 'b'])J"},
    {R"J({{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'abc'.startswith('bc', 1) }}|{{ 'abc'.endswith('ab', 0, 2) }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.rfind('c') }}|{{ 'abc'.find('z') }}|{{ 'éa'.find('a') }}|{{ 'abcabc'.find('c', 3) }}|{{ 'abcabc'.count('b') }}|{{ 'aaa'.count('') }}|{{ 'abc'.index('c') }})J", R"J(True|True|True|True|2|5|-1|1|5|2|4|2)J"},
    {R"J({{ 'aaa'.replace('a', 'b', 2) }}|{{ 'ab'.replace('', '-') }}|{{ 'l1\nl2\r\nl3'.splitlines() }}|{{ 'x'.center(7, '*') }}|{{ 'ab'.center(7) }}|{{ 'a-b-c'.partition('-') }}|{{ 'a-b-c'.rpartition('-') }}|{{ 'abc'.removeprefix('a') }}|{{ 'abc'.removesuffix('c') }}|{{ 'x'.ljust(3, '.') }}|{{ 'x'.rjust(3) }})J", R"J(bba|-a-b-|['l1', 'l2', 'l3']|***x***|   ab  |('a', '-', 'b-c')|('a-b', '-', 'c')|bc|ab|x..|  x)J"},
    {R"J({{ '{} and {}'.format(1, 'b') }}|{{ '{x}!'.format(x=3) }}|{{ "{0}{1}{0}".format('a', 'b') }}|{{ "{}{{}}".format(1) }}|{{ "{!r}".format('x') }}|{{ '-'.join(['1', '2']) }}|{{ '\n'.join(['a', 'b']) }})J", R"J(1 and b|3!|aba|1{}|'x'|1-2|a
b)J"},
    {R"J({{ '%s-%d-%05.2f' % ('a', 3, 2.5) }}|{{ '%r' % 'x' }}|{{ "%d items" % 3 }}|{{ "%5s|%-5s|" % ('a', 'b') }}|{{ "%.3f" % 2 }}|{{ "%x" % 255 }}|{{ "%(a)s" % {'a': 1} }}|{{ "%%" % () }}|{{ "%s" % none }}|{{ "%s" % [1, 2] }}|{{ "%e" % 12345.678 }}|{{ "%g" % 0.0001 }})J", R"J(a-3-02.50|'x'|3 items|    a|b    ||2.000|ff|1|%|None|[1, 2]|1.234568e+04|0.0001)J"},
    {R"J({{ xs.count(1) }}|{{ xs.index(2) }}|{{ (1, 2, 1).count(1) }}|{{ xs.copy() }}|{{ d.copy() }}|{{ xs.append }}|{{ s.__class__ }}|{{ d._private }}|{{ '12'.isdigit() }}|{{ 'ab'.isalpha() }}|{{ ' '.isspace() }}|{{ 'Ab'.islower() }}
)J", R"J(1|2|2|[3, 1, 2]|{'b': 2, 'a': 1}||||True|True|True|False)J"},
}));

TEST(JinjaExpressionErrors, UsingUndefinedFailsOnlyWhereJinja2Fails) {
  EXPECT_EQ(ErrorOf("{{ missing.attr }}"), "line 1: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("\n{{ messages[0].missing.attr }}"), "line 2: 'dict object' has no attribute 'missing'");
  EXPECT_EQ(ErrorOf("{{ messages[7].content }}"), "line 1: list object has no element 7");
  EXPECT_EQ(ErrorOf("{{ missing + 1 }}"), "line 1: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ missing() }}"), "line 1: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ missing[0] }}"), "line 1: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ missing < 1 }}"), "line 1: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ xs.append(4) }}"), "line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(ErrorOf("{{ d.update({}) }}"), "line 1: access to attribute 'update' of 'dict' object is unsafe.");
}

TEST(JinjaExpressionErrors, FailAsPythonDoes) {
  EXPECT_EQ(ErrorOf("{{ 1 / 0 }}"), "line 1: division by zero");
  EXPECT_EQ(ErrorOf("{{ 1 // 0 }}"), "line 1: integer division or modulo by zero");
  EXPECT_EQ(ErrorOf("{{ 'a' + 1 }}"), "line 1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(ErrorOf("{{ n + 1 }}"), "line 1: unsupported operand type(s) for +: 'NoneType' and 'int'");
  EXPECT_EQ(ErrorOf("{{ 'a' < 1 }}"), "line 1: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(ErrorOf("{{ 1 in 'abc' }}"), "line 1: 'in <string>' requires string as left operand, not int");
  EXPECT_EQ(ErrorOf("{{ xs[::0] }}"), "line 1: slice step cannot be zero");
  EXPECT_EQ(ErrorOf("{{ xs['a':] }}"), "line 1: slice indices must be integers or None or have an __index__ method");
  EXPECT_EQ(ErrorOf("{{ 'abc'.index('z') }}"), "line 1: substring not found");
  EXPECT_EQ(ErrorOf("{{ ','.join(xs) }}"), "line 1: sequence item 0: expected str instance, int found");
  EXPECT_EQ(ErrorOf("{{ 'a,b'.split('') }}"), "line 1: empty separator");
  EXPECT_EQ(ErrorOf("{{ '%s %s' % (1,) }}"), "line 1: not enough arguments for format string");
  EXPECT_EQ(ErrorOf("{{ s() }}"), "line 1: 'str' object is not callable");
}

TEST(JinjaExpressionErrors, WhatThisInterpreterDoesNotSupportIsAnError) {
  EXPECT_EQ(ErrorOf("{{ 9223372036854775807 + 1 }}"), "line 1: integer overflow: the result does not fit 64 bits");
  EXPECT_EQ(ErrorOf("{{ 'x'.casefold() }}"), "line 1: the str attribute 'casefold' is not supported");
  EXPECT_EQ(ErrorOf("{{ i.real }}"), "line 1: the int attribute 'real' is not supported");
  EXPECT_EQ(ErrorOf("{{ xs|select('odd') }}"),
            "line 1: printing a generator is not supported (Python prints its address); apply |list");
  EXPECT_EQ(ErrorOf("{{ 'é'.isalpha() }}"), "line 1: str.isalpha() of non-ASCII text is not supported");
  EXPECT_EQ(ErrorOf("{{ '{:>4}'.format(1) }}"),
            "line 1: str.format fields with a format spec, attribute or index are not supported");
}

}  // namespace
}  // namespace crossreg::jinja

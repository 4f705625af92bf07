// The template language feature by feature, with the outputs Python's jinja2 (as transformers sets it
// up) gives for the same templates.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "golden_util.h"

namespace tessera::test {
namespace {

std::string render(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  return ChatTemplate::from_string(src).render(ctx, frozen_clock_options());
}

// The Python exception type the render raised ("" when it did not raise).
std::string error_type(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  try {
    render(src, ctx);
  } catch (const chat::TemplateError& e) {
    return e.type();
  }
  return "";
}

struct Case {
  const char* src;
  const char* want;
};

void check_all(const std::vector<Case>& cases, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  for (auto& c : cases) {
    try {
      EXPECT_EQ(render(c.src, ctx), c.want) << "template: " << c.src;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "template: " << c.src << " raised " << e.what();
    }
  }
}

TEST(ChatEngine, WhitespaceControl) {
  check_all({
      {"{% if true %}\n  x\n{% endif %}\n", "  x\n"},
      {"  {% if true %}yes{% endif %}", "yes"},
      {"a  {%- if true %} b {% endif -%}  c", "a b c"},
      {"{{ 'x' }}\ny", "x\ny"},
      {"{# comment #}\nz", "z"},
      {"  {%+ if true %}a{% endif %}", "  a"},
      {"{% if true +%}\nkeep{% endif %}", "\nkeep"},
      {"a\n  {{- ' b' }}", "a b"},
      {"{% for x in [1, 2] %}\n  {{ x }}\n{% endfor %}\n", "  1\n  2\n"},
      {"x {% raw %}{{ not parsed }}{% endraw %} y", "x {{ not parsed }} y"},
      {"a\r\nb\r\n", "a\nb"},
  });
}

TEST(ChatEngine, Loops) {
  check_all({
      {"{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
       "{{ loop.revindex }}|{% endfor %}",
       "10TrueFalse33|21FalseFalse32|32FalseTrue31|"},
      {"{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}", "-2,1-3,2-,"},
      {"{% for x in range(3) %}{{ loop.cycle('a','b') }}{% endfor %}", "aba"},
      {"{% for x in [] %}x{% else %}empty{% endfor %}", "empty"},
      {"{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}"
       "{% endfor %}",
       "013"},
      {"{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }};{% endfor %}", "13;33;53;"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
      {"{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}", "ba"},
      {"{% for c in 'héj' %}[{{ c }}]{% endfor %}", "[h][é][j]"},
      {"{% for x in [1, 2] %}{% for y in 'ab' %}{{ loop.index }}{{ y }}{% endfor %}{{ loop.index }}{% endfor %}",
       "1a2b11a2b2"},
      {"{% for x in [3, 3, 4] %}{{ loop.changed(x) }}{% endfor %}", "TrueFalseTrue"},
      {"{% for i in range(1, 10, 3) %}{{ i }}{% endfor %}{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}", "147321"},
      // A variable set in one iteration is gone in the next (jinja2 re-initialises the loop body's names).
      {"{% for x in 'ab' %}{% if loop.first %}{% set v = x %}{% endif %}[{{ v }}]{% endfor %}", "[a][]"},
  });
}

TEST(ChatEngine, AssignmentAndScope) {
  check_all({
      {"{% set x = 1 %}{% for i in range(2) %}{% set x = 5 %}{% endfor %}{{ x }}", "1"},
      {"{% set ns = namespace(c=0) %}{% for i in range(4) %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}", "6"},
      {"{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.z is defined }}", "12False"},
      {"{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]", "[a2b]"},
      {"{% set x | upper %}abc{% endset %}{{ x }}", "ABC"},
      {"{% set a, b = 1, 2 %}{{ b }}{{ a }}", "21"},
      {"{% with y = 3 %}{{ y }}{% endwith %}[{{ y }}]", "3[]"},
      {"{% set d = {'b': 1, 'a': 2, 'b': 3} %}{{ d }}", "{'b': 3, 'a': 2}"},
  });
  EXPECT_EQ(error_type("{% set s = 'x' %}{% set s.a = 1 %}"), "TemplateRuntimeError");
  // jinja2's scoping: a name first assigned unconditionally at a level is that level's own from the
  // start (a loop body running before the assignment does not see the context's value); names
  // assigned in only some branches, or read first, start from the context.
  check_all({
      {"{% for m in [1] %}[{{ x }}]{% endfor %}{% set x = 5 %}{{ x }}", "[]5"},
      {"{% if false %}{% set x = 2 %}{% endif %}{{ x }}", "1"},
      {"{{ x }}{% set x = 2 %}{{ x }}", "12"},
      {"{% macro m() %}{{ x }}{% endmacro %}{{ m() }}|{% set x = 3 %}{{ m() }}", "|3"},
      {"{% for i in [] %}{% else %}{% set y = 1 %}{% endfor %}[{{ y }}]", "[]"},
  }, {{"x", 1}});
}

TEST(ChatEngine, Macros) {
  check_all({
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} "
       "{{ greet('Al', punct='?') }}",
       "Hi Bob! Hi Al?"},
      {"{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}in{% endcall %}", "<in>"},
      {"{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
       "{% call(v) each([1,2]) %}[{{ v }}]{% endcall %}",
       "[1][2]"},
      {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", "321"},
      {"{% macro m(a) %}{{ a is defined }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m() }}|{{ m(1, 2, k=3) }}",
       "False(){}|True(2,){'k': 3}"},
      {"{% set g = 'outer' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", "outer"},
      {"{% filter upper %}abc{{ 'd' }}{% endfilter %}", "ABCD"},
      {"{% generation %}gen{% endgeneration %}", "gen"},
  });
  EXPECT_EQ(error_type("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "RecursionError");
  // Extra arguments only where the body reads varargs / kwargs, as jinja2 decides.
  EXPECT_EQ(error_type("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}"), "TypeError");
  EXPECT_EQ(error_type("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(b=1) }}"), "TypeError");
  EXPECT_EQ(render("{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, b=3) }}"), "1(2,){'b': 3}");
  EXPECT_EQ(error_type("{% break %}"), "SyntaxError");
  EXPECT_EQ(error_type("{% for i in [1] %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"), "SyntaxError");
}

TEST(ChatEngine, Expressions) {
  check_all({
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 4 / 2 }}",
       "3 -4 1 2 1024 3.5 2.0"},
      {"{{ 10 / 4 }} {{ 2 ** -1 }} {{ 1 == 1.0 }} {{ true + 1 }} {{ 2 * 3 + 1 }} {{ -2 ** 2 }}",
       "2.5 0.5 True 2 7 4"},
      {"{{ 'a' ~ 1 ~ none ~ missing }}", "a1None"},
      {"{{ 1 in [1,2] }} {{ 3 not in [1,2] }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 'x' in missing }}",
       "True True True True False"},
      {"[{{ 1 if false }}] {{ 'yes' if 1 < 2 < 3 else 'no' }} {{ 'yes' if 1 < 3 < 2 else 'no' }}", "[] yes no"},
      {"{{ [1,2,3,4,5][::2] }} {{ 'héllo'[1:3] }} {{ [1,2,3][::-1] }} {{ 'abc'[-1] }} {{ 'abc'[5:] }}|",
       "[1, 3, 5] él [3, 2, 1] c |"},
      {"{{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 3 * 1.0 }} {{ 1e16 }} {{ 123456789.125 }}",
       "1.0 1e+20 0.30000000000000004 1e-05 3.0 1e+16 123456789.125"},
      {"{{ [1, 'a', none, true, 1.5] }} {{ {'a': [1, {'b': 'c'}]} }} {{ (1,) }} {{ (1, 2) }}",
       "[1, 'a', None, True, 1.5] {'a': [1, {'b': 'c'}]} (1,) (1, 2)"},
      {"{{ \"it's\" }} {{ [\"it's\", 'a\\nb', 'q\"'] }}", "it's [\"it's\", 'a\\nb', 'q\"']"},
      {"{{ 'a\\tb\\u00e9' }}|{{ 'x' 'y' }}", "a\tbé|xy"},
      {"{{ '-' * 3 }}{{ [0] * 2 }}{{ [1] + [2] }}", "---[0, 0][1, 2]"},
      {"{{ not true or false and true }} {{ none or 'd' }} {{ 0 and 1 }}", "False d 0"},
      {"{{ d.a }}{{ d['a'] }}{{ d.get('a') }}{{ d.b }}{{ l[1] }}{{ l.0 }}", "111None20"},
  }, {{"d", {{"a", 1}, {"b", nullptr}}}, {"l", {0, 2}}});
  EXPECT_EQ(error_type("{{ 1 / 0 }}"), "ZeroDivisionError");
  EXPECT_EQ(error_type("{% set n = none %}{{ n[:2] }}"), "TypeError");  // slices are plain Python subscripts
  EXPECT_EQ(error_type("{% set d = {} %}{{ d[1:] }}"), "TypeError");
  EXPECT_EQ(error_type("{{ 'a' + 1 }}"), "TypeError");
  EXPECT_EQ(error_type("{{ 'a' < 1 }}"), "TypeError");
  EXPECT_EQ(error_type("{{ 'a' + {} }}"), "TypeError");
}

TEST(ChatEngine, Tests) {
  check_all({
      {"{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} "
       "{{ 1 is number }} {{ true is boolean }} {{ 3 is odd }} {{ 4 is even }} {{ 1 is eq 1 }} {{ 2 is equalto 3 }} "
       "{{ [] is sequence }} {{ 'a' is sequence }} {{ {} is sequence }}",
       "False True True True True True True True True True False True True True"},
      {"{{ x is true }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 1 is integer }} {{ 1.0 is float }}",
       "False True False True True True"},
      {"{{ x is undefined }} {{ x is not defined }} {{ 'a' is not string }} {{ 6 is divisibleby 3 }} "
       "{{ 2 is in [1, 2] }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 3 is gt 2 }} {{ 3 is le 2 }}",
       "True True False True True True True True False"},
      {"{{ [1] | map('string') is iterable }} {{ [1] | map('string') is sequence }} {{ x is iterable }}",
       "True False True"},
  });
  EXPECT_EQ(error_type("{{ 1 is nosuchtest }}"), "TemplateAssertionError");
}

TEST(ChatEngine, Filters) {
  check_all({
      {"{{ {'b': 1, 'a': [1, 2.0, 'é\"\\n'], 'c': none, 'd': true} | tojson }}",
       "{\"b\": 1, \"a\": [1, 2.0, \"é\\\"\\n\"], \"c\": null, \"d\": true}"},
      {"{{ {'a': [1, 2], 'b': {}, 'c': []} | tojson(indent=2) }}",
       "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": []\n}"},
      {"{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ [1, {'a': 2}] | tojson(separators=(',', ':')) }}",
       "{\"a\": 2, \"b\": 1} [1,{\"a\":2}]"},
      {"{{ 'é' | tojson(ensure_ascii=true) }} {{ '😀' | tojson(true) }}", "\"\\u00e9\" \"\\ud83d\\ude00\""},
      {"{{ 'hello world-wide' | title }} {{ 'hELLO' | capitalize }} {{ ' x ' | trim }}| {{ \"they're\" | title }} "
       "{{ \"they're\".title() }}",
       "Hello World-Wide Hello x| They're They'Re"},
      {"{{ [3,1,2] | sort }} {{ ['b','A','c'] | sort }} {{ [3,1,2] | sort(reverse=true) }} "
       "{{ ['b','A','c'] | sort(case_sensitive=true) }}",
       "[1, 2, 3] ['A', 'b', 'c'] [3, 2, 1] ['A', 'b', 'c']"},
      {"{{ [{'n': 2}, {'n': 1}] | sort(attribute='n') | map(attribute='n') | join(',') }}", "1,2"},
      {"{{ ['a','b'] | join }} {{ [1,2] | join('-') }} {{ [{'x': 'p'}, {'x': 'q'}] | join('+', attribute='x') }}",
       "ab 1-2 p+q"},
      {"{{ 'abc' | length }} {{ 'héllo' | length }} {{ [1,2] | count }} {{ {'a':1} | length }} {{ x | length }}",
       "3 5 2 1 0"},
      {"{{ x | default('d') }} {{ '' | default('e', true) }} {{ none | default('f') }} {{ '' | d('g') }}|",
       "d e None |"},
      {"{{ [1,2,3] | first }} {{ [1,2,3] | last }} {{ 'abc' | first }} {{ [] | first }}|", "1 3 a |"},
      {"{{ ['a','A','b'] | unique | list }} {{ {'b': 1, 'a': 2} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value') }}",
       "['a', 'b'] [('a', 2), ('b', 1)] [('b', 1), ('a', 2)]"},
      {"{{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.7 | round(0, 'floor') }} {{ 3 | round }}", "2.0 3.14 2.0 3"},
      {"{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent('>', blank=true) }}",
       "a\n  b\n\n  c|  a\n  b|a\n>\n>b"},
      {"{{ '%s-%d' | format('x', 3) }} {{ '%05.1f' % 3.14159 }} {{ '%s and %r' % ('a', 'b') }} {{ '%(k)s' % {'k': 1} }}",
       "x-3 003.1 a and 'b' 1"},
      {"{{ '{}:{name}:{0}'.format(1, name='n') }} {{ '{:>4}|{:<3}|{:^5}|{:.2f}|{:03d}'.format('a', 'b', 'c', 2.5, 7) }}",
       "1:n:1    a|b  |  c  |2.50|007"},
      {"{{ [1,2,3,4,5] | batch(2) | list }} {{ [1,2,3] | batch(2, 0) | list }}", "[[1, 2], [3, 4], [5]] [[1, 2], [3, 0]]"},
      {"{{ [1,2,3] | sum }} {{ [1,5,3] | max }} {{ [4,2,8] | min }} {{ -3 | abs }} {{ [{'v': 2}, {'v': 3}] | sum(attribute='v') }}",
       "6 5 2 3 5"},
      {"{{ 'one two  three' | wordcount }} {{ '42' | int + 1 }} {{ 'x' | int }} {{ '3.5' | float }} {{ 3 | string }} "
       "{{ '2.9' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }}",
       "3 43 0 3.5 3 2 7 3"},
      {"{{ [1,2,3,4] | select('odd') | list }} {{ [1,2,3,4] | reject('odd') | list }} {{ [0, 1, ''] | select | list }}",
       "[1, 3] [2, 4] [1]"},
      {"{{ [{'r':'u'},{'r':'a'},{}] | selectattr('r', 'equalto', 'a') | list }} {{ [{'r':'u'},{}] | selectattr('r') | list }} "
       "{{ [{'r':'u'},{}] | rejectattr('r', 'defined') | list }}",
       "[{'r': 'a'}] [{'r': 'u'}] [{}]"},
      {"{{ ['a','b'] | map('upper') | list }} {{ [{'a': {'b': 1}}] | map(attribute='a.b') | list }} "
       "{{ [{}] | map(attribute='z', default='dz') | list }} {{ none | map('upper') | list }}",
       "['A', 'B'] [1] ['dz'] []"},
      {"{{ {'a': 1} | items | list }} {{ x | items | list }} {{ 'abc' | reverse }} {{ [1, 2] | reverse | list }}",
       "[('a', 1)] [] cba [2, 1]"},
      {"{{ 'straße' | upper }} {{ 'ßa'.title() }} {{ 'ßA'.capitalize() }} {{ 'İ' | lower | length }} {{ 'ßa' | title }}",
       "STRASSE Ssa Ssa 2 SSa"},
      {"{{ 'ÄbC' | lower }} {{ 'a-b' | upper }} {{ 'abc' | replace('b', 'X') }} {{ 'aaa' | replace('a', 'b', 2) }}",
       "äbc A-B aXc bba"},
      {"{{ ['x' | safe] }}", "[Markup('x')]"},
      {"{{ 'x'|safe + '<b>' }} {{ ('<a>'|safe) ~ '<b>' }} {{ '<&>' | e }} {{ '<' | escape | escape }}",
       "x&lt;b&gt; <a><b> &lt;&amp;&gt; &lt;"},
      {"{{ 'abcdefghij' | truncate(7, leeway=0) }} {{ 'abcdefghij' | truncate(7) }} {{ 'ab' | center(6) }}|",
       "abcd... abcdefghij   ab  |"},
  });
  EXPECT_EQ(error_type("{{ x | tojson }}"), "TypeError");
  EXPECT_EQ(error_type("{{ [1] | map('string') | tojson }}"), "TypeError");
  EXPECT_EQ(error_type("{{ 'abc' | items | list }}"), "TypeError");
  // Unknown filters fail the whole template, except inside if statements and inline ifs where
  // they fail only when evaluated (jinja2's compile-time check).
  EXPECT_EQ(error_type("{{ 'x' | from_json }}"), "TemplateAssertionError");
  EXPECT_EQ(error_type("{% for x in [] %}{{ x | from_json }}{% endfor %}"), "TemplateAssertionError");
  EXPECT_EQ(render("{% if false %}{{ x | from_json }}{% endif %}{{ 1 if true else (x | from_json) }}"), "1");
  EXPECT_EQ(error_type("{% if true %}{{ x | from_json }}{% endif %}"), "TemplateRuntimeError");
  EXPECT_EQ(error_type("{{ [1] | map('string') | length }}"), "TypeError");
  // Generator filters fail only when consumed, as in Python.
  EXPECT_EQ(render("{% set g = 5 | map('upper') %}ok"), "ok");
  EXPECT_EQ(error_type("{% set g = 5 | map('upper') %}{{ g | list }}"), "TypeError");
  EXPECT_EQ(error_type("{{ 'abc' | indent }}{{ [1] | indent }}"), "AttributeError");
  EXPECT_EQ(render("{{ [1, 2] | truncate(5) }}"), "[1, 2]");
}

TEST(ChatEngine, Methods) {
  check_all({
      {"{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }}",
       "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c']"},
      {"{{ 'x'.startswith(('a','x')) }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith('b', 1) }}", "True True True"},
      {"{{ 'abc'.replace('b', 'X') }} {{ '  x '.strip() }} {{ 'xxhixx'.strip('x') }} {{ 'xxhi'.lstrip('x') }} "
       "{{ 'hi\\n'.rstrip() }}|",
       "aXc x hi hi hi|"},
      {"{{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'a-b-c'.count('-') }} {{ '-'.join(['a', 'b']) }}",
       "2 -1 2 a-b"},
      {"{{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hello world'.capitalize() }} {{ 'ab'.center(6, '*') }}",
       "HELLO hello Hello world **ab**"},
      {"{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'k=v'.partition('=') }} {{ 'abc'.removeprefix('a') }}",
       "['a', 'b', 'c'] ('k', '=', 'v') bc"},
      {"{{ {'a': 1}.get('b', 2) }} {{ {'a': 1}.get('a') }} {{ {'a': 1}.keys() | list }} {{ {'a': 1}.values() | list }}",
       "2 1 ['a'] [1]"},
      {"{{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }}",
       "2 1 True True True"},
      {"{% set d = {'items': 5} %}{{ d.items is defined }} {{ d['items'] }} {{ d.items() | list }}",
       "True 5 [('items', 5)]"},
      {"{% set d = {'a': 1, 'b': 2} %}{{ d.keys() }} {{ d.values() | list }} {{ d.items() | length }} {{ 'a' in d.keys() }} "
       "{{ d.keys() | join(',') }} {{ d.items() | first }}",
       "dict_keys(['a', 'b']) [1, 2] 2 True a,b ('a', 1)"},
  });
  EXPECT_EQ(error_type("{{ {'a': 1}.keys() | tojson }}"), "TypeError");
  EXPECT_EQ(error_type("{{ 1 is boolean [2] }}"), "TypeError");  // tests check their arity
}

TEST(ChatEngine, UndefinedAndSandbox) {
  check_all({{"{{ missing }}|{{ d.nokey }}|{% for x in missing %}x{% endfor %}|{{ missing | string }}", "|||"}},
            {{"d", nlohmann::ordered_json::object()}});
  EXPECT_EQ(error_type("{{ missing.attr }}"), "UndefinedError");
  EXPECT_EQ(error_type("{{ missing + 1 }}"), "UndefinedError");
  EXPECT_EQ(error_type("{{ missing() }}"), "UndefinedError");
  EXPECT_EQ(error_type("{{ 'abc'.items() }}"), "UndefinedError");
  EXPECT_EQ(error_type("{% set l = [1] %}{{ l.append(2) }}"), "SecurityError");
  EXPECT_EQ(error_type("{% set l = [1] %}{{ l.pop() }}"), "SecurityError");
  EXPECT_EQ(error_type("{{ {'a': 1}.update({}) }}"), "SecurityError");
  EXPECT_EQ(error_type("{% for x in none %}{% endfor %}"), "TypeError");
  EXPECT_EQ(error_type("{{ none | length }}"), "TypeError");
  EXPECT_EQ(error_type("{{ range(200000) | length }}"), "OverflowError");
}

TEST(ChatEngine, ErrorsNameLineAndColumn) {
  try {
    render("line one\n  {{ raise_exception('boom') }}");
    FAIL() << "expected an error";
  } catch (const chat::TemplateError& e) {
    EXPECT_EQ(e.type(), "TemplateError");
    EXPECT_EQ(e.message(), "boom");
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.column(), 6);
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
  }
  try {
    render("ok\n\n{% if x %}\n{{ 1 + }}");
    FAIL() << "expected a syntax error";
  } catch (const chat::TemplateError& e) {
    EXPECT_EQ(e.type(), "TemplateSyntaxError");
    EXPECT_EQ(e.line(), 4);
  }
  EXPECT_EQ(error_type("{% if x %}"), "TemplateSyntaxError");
  EXPECT_EQ(error_type("{% foo %}"), "TemplateSyntaxError");
  EXPECT_EQ(error_type("{{ 'unterminated }}"), "TemplateSyntaxError");
  EXPECT_EQ(error_type("{{ (1 }}"), "TemplateSyntaxError");
}

TEST(ChatEngine, Globals) {
  check_all({
      {"{{ strftime_now('%Y-%m-%d %d %B %Y') }}", "2024-09-03 03 September 2024"},
      {"{{ dict(a=1, b=2) }} {{ range(3) | list }} {% set c = cycler('x', 'y') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}",
       "{'a': 1, 'b': 2} [0, 1, 2] xyxy"},
      {"{% set j = joiner('+') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", "a+b+c"},
  });
  EXPECT_EQ(error_type("{{ raise_exception('no') }}"), "TemplateError");
}

TEST(ChatEngine, Limits) {
  chat::RenderOptions o = frozen_clock_options();
  o.max_loop_iterations = 1000;
  try {
    ChatTemplate::from_string("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}")
        .render(nlohmann::ordered_json::object(), o);
    FAIL() << "expected the loop limit to stop the render";
  } catch (const chat::TemplateError& e) {
    EXPECT_EQ(e.type(), "RuntimeError");
  }
  EXPECT_EQ(error_type("{{ 'x' * 100000000 }}"), "MemoryError");
  EXPECT_EQ(error_type("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}"), "TemplateSyntaxError");
}

TEST(ChatEngine, TransformersContext) {
  auto ctx = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "enable_thinking": false})");
  EXPECT_EQ(render("{{ messages[0].content[0].text }}|{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|"
                   "{{ enable_thinking }}|{{ reasoning_effort is defined }}",
                   ctx),
            "hi|False|None|None|False|False");
}

}  // namespace
}  // namespace tessera::test

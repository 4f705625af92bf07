// The grammar matcher, the token trie and the JSON Schema compiler. Acceptance is checked
// against nlohmann::json's own parser (any JSON value) and a small validator of the schema
// keywords the compiler supports; the trie against asking the matcher token by token.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/code_points.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/vocab.h"

using namespace tessera;
using namespace tessera::grammar;
using json = nlohmann::json;

namespace {

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text) && m.complete();
}

// The message a compiler refuses `text` with; "" when it accepts it.
template <class F>
std::string refusal(F compile, const char* text) {
  try {
    compile(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::shared_ptr<const Grammar> schema(const char* text) { return json_schema_grammar(nlohmann::ordered_json::parse(text)); }

// Counts code points (minLength / maxLength count characters, not bytes).
int64_t chars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The schema keywords json_schema_grammar supports, as a validator.
bool valid(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) return valid(v, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  for (const char* k : {"anyOf", "oneOf"})
    if (s.contains(k)) {
      for (const auto& sub : s[k])
        if (valid(v, sub, root)) return true;
      return false;
    }
  if (s.contains("allOf")) return valid(v, s["allOf"][0], root);
  if (!s.contains("type")) return true;
  std::vector<std::string> types;
  if (s["type"].is_string()) types.push_back(s["type"]);
  else for (const auto& t : s["type"]) types.push_back(t);
  for (const auto& t : types) {
    if (t == "null" && v.is_null()) return true;
    if (t == "boolean" && v.is_boolean()) return true;
    // Integers past 64 bits parse as doubles.
    if (t == "integer" && v.is_number() && (v.is_number_integer() || std::floor(v.get<double>()) == v.get<double>()))
      return true;
    if (t == "number" && v.is_number()) return true;
    if (t == "string" && v.is_string()) {
      const int64_t n = chars(v.get<std::string>());
      if (n >= s.value("minLength", int64_t(0)) && n <= s.value("maxLength", int64_t(1) << 40)) return true;
    }
    if (t == "array" && v.is_array()) {
      const int64_t n = int64_t(v.size());
      bool ok = n >= s.value("minItems", int64_t(0)) && n <= s.value("maxItems", int64_t(1) << 40);
      for (const auto& item : v) ok = ok && (!s.contains("items") || valid(item, s["items"], root));
      if (ok) return true;
    }
    if (t == "object" && v.is_object()) {
      bool ok = true;
      for (const auto& r : s.value("required", json::array())) ok = ok && v.contains(r.get<std::string>());
      const json props = s.value("properties", json::object());
      const json extra = s.contains("additionalProperties") ? s["additionalProperties"] : json(!s.contains("properties"));
      for (const auto& [k, item] : v.items())
        ok = ok && (props.contains(k) ? valid(item, props[k], root) : valid(item, extra, root));
      if (ok) return true;
    }
  }
  return false;
}

// A random sentence of g, byte by byte: at each step one of the bytes the matcher allows, with
// the bytes that close things preferred so that strings and arrays end. Empty when no sentence
// was finished within max_bytes.
std::string random_sentence(const std::shared_ptr<const Grammar>& g, std::mt19937& rng, size_t max_bytes = 400) {
  Matcher m(g);
  std::string out;
  const std::string closing = "\"}]0123456789tfnl";
  while (out.size() < max_bytes) {
    if (m.complete() && (!m.can_continue() || rng() % 4 == 0)) return out;
    std::vector<int> allowed, preferred;
    for (int b = 0; b < 256; ++b)
      if (m.accepts(std::string(1, char(b)))) {
        allowed.push_back(b);
        if (closing.find(char(b)) != std::string::npos) preferred.push_back(b);
      }
    if (allowed.empty()) return m.complete() ? out : std::string();
    const auto& pick = !preferred.empty() && rng() % 3 ? preferred : allowed;
    const char b = char(pick[rng() % pick.size()]);
    EXPECT_TRUE(m.advance(std::string(1, b)));
    out += b;
  }
  return m.complete() ? out : std::string();
}

}  // namespace

TEST(Grammar, MatcherFollowsAndRefusesWithoutChange) {
  Grammar g;
  const int digits = g.new_rule(), number = g.new_rule();
  g.add(digits, {});
  g.add(digits, {g.bytes(byte_range('0', '9')), Grammar::rule(digits)});
  g.add(number, {g.bytes(byte_range('1', '9')), Grammar::rule(digits), g.bytes(byte_set("kK"))});
  g.set_root(number);
  g.finish();
  Matcher m(std::make_shared<const Grammar>(std::move(g)));
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.advance("12"));
  EXPECT_FALSE(m.complete());
  EXPECT_FALSE(m.advance("3x"));  // refused as a whole: "3" is not read either
  EXPECT_TRUE(m.accepts("3k"));
  EXPECT_TRUE(m.advance("30"));
  EXPECT_TRUE(m.advance("K"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
  EXPECT_FALSE(m.advance("0"));
}

TEST(Grammar, LongRepetitionKeepsTheStackFlat) {
  auto g = schema(R"({"type": "string"})");
  Matcher m(g);
  ASSERT_TRUE(m.advance("\""));
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(m.advance("ab"));
  ASSERT_TRUE(m.advance("\""));
  EXPECT_TRUE(m.complete());
}

TEST(Grammar, RefusesLeftRecursionAndEmptyRules) {
  Grammar g;
  const int a = g.new_rule(), b = g.new_rule();
  g.add(a, {Grammar::rule(b), g.bytes(byte_set("x"))});
  g.add(b, {});
  g.add(b, {Grammar::rule(a)});
  g.set_root(a);
  EXPECT_THROW(g.finish(), Error);
  Grammar h;
  h.set_root(h.new_rule());
  EXPECT_THROW(h.finish(), Error);
  EXPECT_THROW(schema(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"})"),
               Error);
}

// Whether each run of whitespace outside strings is one the grammars allow: none, one space, or
// a newline and up to 20 spaces or tabs.
bool whitespace_ok(const std::string& text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      in_string = c != '"';
      i += c == '\\' ? 2 : 1;
      continue;
    }
    if (c == '"') in_string = true;
    if (!std::strchr(" \t\n\r", c)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::strchr(" \t\n\r", text[j])) ++j;
    const std::string run = text.substr(i, j - i);
    const bool ok = run == " " || (run[0] == '\n' && run.size() <= 21 && run.find_first_not_of(" \t", 1) == std::string::npos);
    if (!ok) return false;
    i = j;
  }
  return true;
}

// Any JSON value ({}): the grammar and nlohmann's parser (with the whitespace rule) agree on
// valid documents and on one-byte corruptions of them (nlohmann also checks UTF-8 in strings).
TEST(JsonSchema, AnyValueAgreesWithAJsonParser) {
  auto g = schema("{}");
  std::mt19937 rng(7);
  const std::vector<std::string> docs = {
      R"({"a": [1, -2.5e+3, true, false, null], "b": {"c": "d\n\u00e9\"\\"}, "é": []})",
      R"([0, -0, 1E5, 0.25, "", {}, [[]], "\ud83d\ude00 ☃"])",
      R"("x")", "12", "true", "null", R"({"k":{"k":{"k":{"k":1}}}})",
  };
  int agreed = 0;
  for (const auto& doc : docs) {
    for (int indent : {-1, 0, 2}) {
      const std::string text = indent < 0 ? doc : json::parse(doc).dump(indent);
      EXPECT_TRUE(matches(g, text)) << text;
      for (int k = 0; k < 300; ++k) {
        std::string bad = text;
        const size_t at = rng() % bad.size();
        const std::string alphabet = "{}[]\",:-+.eE0123456789 \n\\utrfalsn\xC3\xA9\xFF";
        if (rng() % 3 == 0) bad.erase(at, 1);
        else bad[at] = alphabet[rng() % alphabet.size()];
        EXPECT_EQ(matches(g, bad), json::accept(bad) && whitespace_ok(bad)) << bad;
        ++agreed;
      }
    }
  }
  EXPECT_GT(agreed, 6000);
}

TEST(JsonSchema, WhitespaceIsBounded) {
  auto g = schema(R"({"type": "object"})");
  EXPECT_TRUE(matches(g, "{\n" + std::string(20, ' ') + "}"));
  EXPECT_FALSE(matches(g, "{\n" + std::string(21, ' ') + "}"));
  EXPECT_FALSE(matches(g, "{\n\n}"));
  EXPECT_FALSE(matches(g, "{  }"));
  EXPECT_TRUE(matches(g, "\n{\"a\": 1}\n"));
  EXPECT_TRUE(matches(g, json::parse(R"({"a": [1, {"b": null}], "c": {}})").dump(4)));
  EXPECT_FALSE(matches(g, "[1]"));  // json_object: an object only
}

TEST(JsonSchema, ObjectsListTheirPropertiesInOrder) {
  auto g = schema(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                      "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}, "required": ["name", "age"]})");
  EXPECT_TRUE(matches(g, R"({"name": "x", "age": 3})"));
  EXPECT_TRUE(matches(g, R"({"name":"x","age":-30,"tags":["a","b","a"]})"));
  EXPECT_TRUE(matches(g, R"({"name": "x", "age": 3, "tags": []})"));
  EXPECT_FALSE(matches(g, R"({"age": 3, "name": "x"})"));           // out of order
  EXPECT_FALSE(matches(g, R"({"name": "x"})"));                    // age required
  EXPECT_FALSE(matches(g, R"({"name": "x", "age": 3.5})"));        // an integer
  EXPECT_FALSE(matches(g, R"({"name": "x", "age": 3, "z": 1})"));  // no other members
  EXPECT_FALSE(matches(g, R"({"name": "x", "age": 3, "tags": ["c"]})"));
  EXPECT_FALSE(matches(g, R"({"name": "x", "age": 3,})"));

  auto optional = schema(R"({"properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}}})");
  for (const char* ok : {"{}", R"({"b": null})", R"({"a": null, "c": null})", R"({"a":null,"b":null,"c":null})"})
    EXPECT_TRUE(matches(optional, ok)) << ok;
  for (const char* bad : {R"({,"b": null})", R"({"b": null,})", R"({"c": null, "a": null})", R"({"a": null "b": null})"})
    EXPECT_FALSE(matches(optional, bad)) << bad;

  auto extra = schema(R"({"properties": {"a": {"type": "integer"}}, "required": ["a"],
                          "additionalProperties": {"type": "boolean"}})");
  EXPECT_TRUE(matches(extra, R"({"a": 1, "x": true, "y": false})"));
  EXPECT_FALSE(matches(extra, R"({"a": 1, "x": 2})"));
}

TEST(JsonSchema, CountsAndLiterals) {
  auto g = schema(R"({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 2},
                      "minItems": 2, "maxItems": 3})");
  EXPECT_TRUE(matches(g, R"(["a", "bc"])"));
  EXPECT_TRUE(matches(g, R"(["é", "\n", "☃x"])"));  // characters, not bytes
  EXPECT_FALSE(matches(g, R"(["a"])"));
  EXPECT_FALSE(matches(g, R"(["a", "b", "c", "d"])"));
  EXPECT_FALSE(matches(g, R"(["a", ""])"));
  EXPECT_FALSE(matches(g, R"(["a", "abc"])"));
  auto lit = schema(R"({"anyOf": [{"const": {"k": [1, "é"]}}, {"enum": [null, 2.5, "x\"y"]}, {"type": ["boolean", "null"]}]})");
  for (const char* ok : {R"({"k":[1,"é"]})", "null", "2.5", R"("x\"y")", "true"}) EXPECT_TRUE(matches(lit, ok)) << ok;
  for (const char* bad : {R"({"k": [1, "é"]})", "2.50", R"("xy")", "1"}) EXPECT_FALSE(matches(lit, bad)) << bad;
}

TEST(JsonSchema, RefusesWhatItCannotHold) {
  for (const char* bad : {R"({"type": "string", "pattern": "(?=a)b"})", R"({"type": "integer", "minimum": 0})",
                          R"({"type": "object", "required": ["a"]})", R"({"type": "tuple"})", "false", "3",
                          R"({"$ref": "#/$defs/missing"})", R"({"$ref": "https://example.com/s.json"})",
                          R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})", R"({"type": "string", "minLength": 3, "maxLength": 2})"}) {
    EXPECT_NE(refusal(schema, bad).find("json_schema"), std::string::npos) << bad;
  }
}

// Random sentences of each grammar parse as JSON and satisfy the schema.
TEST(JsonSchema, EverySentenceSatisfiesTheSchema) {
  const char* schemas[] = {
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "number"},
          "kind": {"enum": ["a", "b", 3]}, "list": {"type": "array", "items": {"type": "integer"}, "maxItems": 4}},
          "required": ["name", "kind"]})",
      R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
          "$ref": "#/$defs/node"})",
      R"({"type": ["array", "boolean"], "items": {"type": "object"}, "minItems": 1})",
      R"({})",
  };
  std::mt19937 rng(11);
  for (const char* text : schemas) {
    const json s = json::parse(text);
    auto g = schema(text);
    int finished = 0;
    for (int k = 0; k < 200; ++k) {
      const std::string out = random_sentence(g, rng);
      if (out.empty()) continue;
      json v;
      try {
        v = json::parse(out);
      } catch (const json::out_of_range&) {  // a number past double's range: JSON, but not parsed here
        continue;
      }
      ++finished;
      EXPECT_TRUE(valid(v, s, s)) << text << "\n" << out;
    }
    EXPECT_GT(finished, 50) << text;
  }
}

// The trie's allowed tokens are exactly those the matcher accepts one by one.
TEST(Vocab, AllowedEqualsAskingEachToken) {
  std::mt19937 rng(3);
  std::vector<std::string> tokens = {"", "{", "}", "{\"", "\"", "\":", ", ", "a", "ab", "abc", "\"a", "1", "12", "-",
                                     "true", "tr", "null", " ", "\n", "\xC3", "\xA9", "\xC3\xA9", "]", "[", "\\u00"};
  const std::string alphabet = "{}[]\":, \nabtruenl0123-\\\xC3\xA9";
  while (tokens.size() < 3000) {
    std::string t;
    for (size_t n = 1 + rng() % 5; n-- > 0;) t += alphabet[rng() % alphabet.size()];
    tokens.push_back(t);
  }
  Vocab vocab(tokens);
  auto g = schema(R"({"type": "object", "properties": {"ab": {"type": "array", "items": {"type": ["string", "integer"]}},
                                                       "t": {"type": "boolean"}}})");
  for (const char* prefix : {"", "{", "{\"ab\": [", "{\"ab\": [\"x", "{\"ab\": [1", "{\"ab\": [12, \"\xC3", "{\"t\": tr",
                             "{\"t\": true"}) {
    Matcher m(g);
    ASSERT_TRUE(m.advance(prefix)) << prefix;
    std::vector<uint8_t> allowed;
    vocab.allowed(m, allowed);
    ASSERT_EQ(allowed.size(), tokens.size());
    int n = 0;
    for (size_t id = 0; id < tokens.size(); ++id) {
      const bool expect = !tokens[id].empty() && m.accepts(tokens[id]);
      EXPECT_EQ(bool(allowed[id]), expect) << prefix << " | " << tokens[id];
      n += expect;
    }
    EXPECT_GT(n, 0) << prefix;
  }
}

// The same where plain text is counted (maxLength, minLength, a regular expression's bounds):
// plain tokens of up to the characters left are allowed without a walk (Vocab::text_run).
// Tokens of 1-12 characters, one to four bytes each, around a count's end.
TEST(Vocab, CountedTextAllowedEqualsAskingEachToken) {
  std::mt19937 rng(5);
  const std::vector<std::string> chars = {"a", "b", "z", "0", "7", " ", "-", "\xC3\xA9", "\xE6\x97\xA5",
                                          "\xF0\x9F\x98\x80", "\"", "\\", "\\n", ",", ":", "}"};
  std::vector<std::string> tokens = {"", "\"", "\",", "\", \"", "\"}", "\xC3", "\xA9"};
  while (tokens.size() < 4000) {
    std::string t;
    // Mostly plain text (the first ten characters), some with JSON's punctuation.
    const size_t pool = rng() % 4 ? 10 : chars.size();
    for (size_t n = 1 + rng() % 12; n-- > 0;) t += chars[rng() % pool];
    tokens.push_back(t);
  }
  Vocab vocab(tokens);
  auto check = [&](const std::shared_ptr<const Grammar>& g, const std::string& prefix) {
    Matcher m(g);
    ASSERT_TRUE(m.advance(prefix)) << prefix;
    std::vector<uint8_t> allowed;
    vocab.allowed(m, allowed);
    ASSERT_EQ(allowed.size(), tokens.size());
    for (size_t id = 0; id < tokens.size(); ++id) {
      const bool expect = !tokens[id].empty() && m.accepts(tokens[id]);
      ASSERT_EQ(bool(allowed[id]), expect) << prefix << " | " << tokens[id];
    }
  };
  auto g = schema(R"({"type": "object", "properties": {"s": {"type": "string", "maxLength": 6},
                                                       "t": {"type": "string", "minLength": 2, "maxLength": 4},
                                                       "p": {"type": "string", "pattern": "^[a-z]{3}[0-9]+$"},
                                                       "u": {"type": "string"}}, "required": ["s", "t", "p", "u"]})");
  for (const char* s : {"", "a", "ab\xC3\xA9", "abcde", "a\\nb\xF0\x9F\x98\x80" "c", "abcdef"})
    check(g, std::string("{\"s\": \"") + s);
  for (const char* t : {"", "x", "xy", "x\xE6\x97\xA5z", "wxyz"}) check(g, std::string("{\"s\": \"\", \"t\": \"") + t);
  const std::string before_p = "{\"s\": \"\", \"t\": \"ab\", \"p\": \"";
  for (const char* p : {"", "ab", "abc", "abc1"}) check(g, before_p + p);
  check(g, before_p + "abc1\", \"u\": \"free \xC3\xA9");
  for (const char* re : {".{2,7}", "[ -~]{0,5}x", "(ab|cd){0,3}"})
    for (const char* prefix : {"", "a", "ab", "abcd"})
      if (Matcher(regex_grammar(re)).accepts(prefix)) check(regex_grammar(re), prefix);
}

TEST(Grammar, ChoiceOfTexts) {
  auto g = choice_grammar({"positive", "pos", "negative", ""});
  for (const char* ok : {"positive", "pos", "negative", ""}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"posit", "neg", "positives", " pos", "neutral"}) EXPECT_FALSE(matches(g, bad)) << bad;
  Matcher m(g);
  EXPECT_TRUE(m.complete());  // "" is a choice
  ASSERT_TRUE(m.advance("pos"));
  EXPECT_TRUE(m.complete() && m.can_continue());
  EXPECT_THROW(choice_grammar({}), Error);
}

std::shared_ptr<const Grammar> gbnf(const char* text) { return gbnf_grammar(text); }

TEST(Gbnf, RulesLiteralsClassesAndRepetition) {
  auto g = gbnf(R"(
    # a list of answers
    root   ::= answer ("," ws answer)*
    answer ::= "yes" | "no"
             | [0-9]{1,3} | "\"" [^"\\\n]* "\""
    ws     ::= [ \t]?
  )");
  for (const char* ok : {"yes", "no,yes", "7, 42,no", "123", "\"a b\"", "\"é☃\",yes", "\"\""})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"", "maybe", "1234", "yes,", "yes,  no", "\"a\\\"", "\"\n\"", "yes no"})
    EXPECT_FALSE(matches(g, bad)) << bad;

  auto counts = gbnf(R"(root ::= "a"{2} "b"{1,} "c"{0,2} ("de")+ .? "\x41\u00e9\U0001F999")");
  EXPECT_TRUE(matches(counts, "aabde" "Aé🦙"));
  EXPECT_TRUE(matches(counts, "aabbbccdedez" "Aé🦙"));
  EXPECT_TRUE(matches(counts, "aabde☃" "Aé🦙"));
  EXPECT_FALSE(matches(counts, "abde" "Aé🦙"));
  EXPECT_FALSE(matches(counts, "aabcccde" "Aé🦙"));
  EXPECT_FALSE(matches(counts, "aab" "Aé🦙"));
}

// Character classes over code points, as UTF-8: every code point of a sample, in or out.
TEST(Gbnf, ClassesMatchExactlyTheirCodePoints) {
  auto g = gbnf(R"(root ::= [a-zа-я\u00e0-\u00ff\u0800-\uFFFD\U00010000-\U0001F600] | [^\x00-\u07ff])");
  auto in_class = [](uint32_t c) {
    const bool first = (c >= 'a' && c <= 'z') || (c >= 0x430 && c <= 0x44F) || (c >= 0xE0 && c <= 0xFF) ||
                       (c >= 0x800 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x1F600);
    return first || c > 0x7FF;  // the negated class: everything from U+0800 (surrogates are not characters)
  };
  std::mt19937 rng(5);
  std::vector<uint32_t> sample = {0, 'a', 'z', '{', 0x42F, 0x430, 0x44F, 0xDF, 0xE0, 0xFF, 0x100, 0x7FF, 0x800, 0xFFFD,
                                  0xFFFE, 0xFFFF, 0x10000, 0x1F600, 0x1F601, 0x10FFFF};
  for (int k = 0; k < 3000; ++k) sample.push_back(rng() % 0x110000);
  for (uint32_t c : sample) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    EXPECT_EQ(matches(g, utf8(c)), in_class(c)) << std::hex << c;
  }
  // Bytes that are no character: never.
  for (const char* bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF"}) EXPECT_FALSE(matches(g, bad));
}

TEST(Gbnf, ErrorsNameTheLineAndColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= \"a", "line 1, column 10: unterminated string"},
      {"root ::= a\n", "rule 'a' is used but not defined"},
      {"start ::= \"x\"", "no rule 'root'"},
      {"root ::= \"x\"\nroot ::= \"y\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= [b-a]", "runs backwards"},
      {"root ::= x \"a\"\nx ::= root | \"b\"", "can reach itself before reading"},
      {"root ::= \"a\"{3,1}", "below its minimum"},
      {"root ::= (\"a\"", "missing ')'"},
      {"root = \"a\"", "expected '::='"},
      {"root ::= \"\\q\"", "unknown escape"},
  };
  for (auto [text, want] : cases) {
    const std::string why = refusal(gbnf, text);
    EXPECT_NE(why.find(want), std::string::npos) << text << " -> " << why;
  }
}

// Whole-text matches against std::regex (ECMAScript) on random texts over a small alphabet.
TEST(Regex, AgreesWithStdRegex) {
  // Each pattern with a text it matches; random texts and one-character edits of that one.
  const std::pair<const char*, const char*> patterns[] = {
      {"a|b", "b"}, {"(ab)*c?", "ababc"}, {"[a-c]+x{2,3}", "cabxxx"}, {"[^abc]{1,2}", "x1"}, {"a.b", "a-b"},
      {"(a|bc)+(?:x|)", "bcax"}, {"\\d{2}-\\w\\s?", "12-_ "}, {"[\\d.]+", "1.2"}, {"(?<y>a)(?P<z>b)?c*", "abcc"},
      {"x{3}", "xxx"}, {"x{1,}", "xx"}, {"[\\]\\\\a-]+", "]\\-a"}, {"\\.\\*\\+", ".*+"}, {"(a*b)*", "aabb"},
      {"[-a]b", "-b"}, {"a{2}?b+?", "aabb"},
  };
  const std::string alphabet = "abcx12-. \n\\]*+_";
  std::mt19937 rng(8);
  for (auto [p, example] : patterns) {
    auto g = regex_grammar(p);
    const std::regex re(p == std::string("(?<y>a)(?P<z>b)?c*") ? "(a)(b)?c*" : p, std::regex::ECMAScript);
    ASSERT_TRUE(std::regex_match(std::string(example), re)) << p;
    EXPECT_TRUE(matches(g, example)) << p;
    for (int k = 0; k < 1500; ++k) {
      std::string t = example;
      if (k % 2) {
        t.clear();
        for (size_t n = rng() % 7; n-- > 0;) t += alphabet[rng() % alphabet.size()];
      } else if (rng() % 3 == 0 && !t.empty()) {
        t.erase(rng() % t.size(), 1);
      } else {
        t.insert(rng() % (t.size() + 1), 1, alphabet[rng() % alphabet.size()]);
      }
      EXPECT_EQ(matches(g, t), std::regex_match(t, re)) << p << " on '" << t << "'";
    }
  }
  for (const char* bad : {"(a)\\1", "(?=a)", "a\\b", "a^b", "*a", "(a", "a)", "[a", "[b-a]", "x{3,1}", "\\q"}) {
    EXPECT_NE(refusal(regex_grammar, bad).find("regex"), std::string::npos) << bad;
  }
}

// A string schema's pattern: found anywhere unless anchored, its characters JSON-escaped.
TEST(JsonSchema, StringPatterns) {
  auto mail = schema(R"({"type": "string", "pattern": "^[a-z]+@[a-z]+\\.com$"})");
  EXPECT_TRUE(matches(mail, R"("ada@example.com")"));
  EXPECT_FALSE(matches(mail, R"("ada@example.org")"));
  EXPECT_FALSE(matches(mail, R"(" ada@example.com")"));
  auto inside = schema(R"({"type": "string", "pattern": "ab+"})");
  EXPECT_TRUE(matches(inside, R"("xx abbb yy")"));
  EXPECT_TRUE(matches(inside, R"("ab")"));
  EXPECT_FALSE(matches(inside, R"("a b")"));
  auto quoted = schema(R"({"type": "string", "pattern": "^say \"hi\"\\\\.$"})");
  EXPECT_TRUE(matches(quoted, R"("say \"hi\"\\.")"));  // the text: say "hi"\.
  EXPECT_FALSE(matches(quoted, R"("say "hi"\.")"));
  auto lines = schema(R"({"type": "string", "pattern": "^a\nb$"})");
  EXPECT_TRUE(matches(lines, R"("a\nb")"));
  EXPECT_FALSE(matches(lines, "\"a\nb\""));  // a raw newline is no JSON
}

// A grammar read in thousands of ways at once is given up on (Walk::kBudget) rather than
// followed for seconds: the mask and the matcher throw, the matcher unchanged.
TEST(Grammar, TooAmbiguousToFollowIsRefused) {
  std::vector<std::string> tokens;
  for (char a = 'a'; a <= 'z'; ++a)
    for (char b = 'a'; b <= 'z'; ++b) tokens.push_back(std::string(1, a) + b), tokens.push_back(std::string(1, a));
  Vocab vocab(tokens);
  Matcher m(regex_grammar("(.?){3000}x"));
  std::vector<uint8_t> allowed;
  EXPECT_THROW(vocab.allowed(m, allowed), Error);
  EXPECT_THROW(m.advance("abcdefghijklmnopqrstuvwxyz"), Error);
  EXPECT_TRUE(m.advance("x"));  // still at the start: "x" alone is a sentence
  EXPECT_TRUE(m.complete());
  Matcher fine(regex_grammar("(.?){20}x"));
  EXPECT_NO_THROW(vocab.allowed(fine, allowed));
}

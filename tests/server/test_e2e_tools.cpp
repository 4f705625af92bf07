// End to end: tool calls and reasoning from a real model through `tessera serve`, read back with
// the official OpenAI client (tests/server/js/tools_client.js).
//
// The model is the tiny llama fixture, whose weights are random; its greedy continuation of a
// fixed prompt is found first through /v1/completions. A model directory is then written whose
// tokenizer names those continuation tokens "<think>", "Checking the weather.", "</think>",
// "<tool_call>", a JSON call in two pieces, "</tool_call>" (the markers special tokens, as in real models)
// and whose chat template renders exactly that prompt, the next token being its EOS. The engine
// then genuinely generates a reasoned tool call, whatever the request's messages. Two tokens
// outside that continuation are "[" and "]", so that a grammar holding the model to an array
// of calls (tool_choice "required") can be followed.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "server_process.h"
#include "testutil.h"

using namespace tessera::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kPieces = {
    "<think>",     "Checking the weather.",       "</think>",
    "<tool_call>", R"({"name": "get_weather", )", R"("arguments": {"city": "Paris"}})",
    "</tool_call>"};
const std::set<std::string> kSpecial = {"<think>", "</think>", "<tool_call>", "</tool_call>"};
// The same answer with Gemma 4's reasoning tags, whose open tag is two tokens: <|channel>, then
// the plain word "thought".
const std::vector<std::string> kGemmaPieces = {
    "<|channel>",  "thought",  "Checking the weather.", "<channel|>", "<tool_call>", R"({"name": "get_weather", )",
    R"("arguments": {"city": "Paris"}})", "</tool_call>"};
const std::set<std::string> kGemmaSpecial = {"<|channel>", "<channel|>", "<tool_call>", "</tool_call>"};

fs::path llama() {
  return fixtures_dir() / "models" / "llama";
}

// A prompt of three ids whose greedy continuation has `pieces` + 1 distinct tokens, none of
// them in the prompt: {prompt..., continuation...}.
std::pair<std::vector<int>, std::vector<int>> find_prompt(const std::string& base_url, size_t pieces) {
  httplib::Client cli(base_url);
  size_t need = pieces + 1;
  for (int p = 10; p < 300; p += 7) {
    std::vector<int> prompt = {p, p + 1, p + 2};
    json body = {{"prompt", prompt},
                 {"max_tokens", need},
                 {"temperature", 0},
                 {"ignore_eos", true},
                 {"return_token_ids", true}};
    auto res = cli.Post("/v1/completions", body.dump(), "application/json");
    if (!res || res->status != 200) return {};
    std::vector<int> cont = json::parse(res->body)["choices"][0]["token_ids"].get<std::vector<int>>();
    std::set<int> seen(prompt.begin(), prompt.end());
    bool ok = cont.size() == need;
    for (int id : cont) ok = ok && seen.insert(id).second;
    if (ok) return {prompt, cont};
  }
  return {};
}

void write_json(const fs::path& path, const json& j) {
  std::ofstream(path) << j.dump(2);
}

// The model directory described at the top of the file, named `name`, answering `pieces`.
fs::path write_model(const std::vector<int>& prompt, const std::vector<int>& cont, const std::string& name,
                     const std::vector<std::string>& pieces, const std::set<std::string>& special) {
  fs::path dir = binary_dir() / "tool_model";
  fs::remove_all(dir / name);
  fs::create_directories(dir / name);
  dir /= name;
  fs::copy_file(llama() / "model.safetensors", dir / "model.safetensors");
  int eos = cont.back();
  json config = json::parse(read_file(llama() / "config.json"));
  config["eos_token_id"] = eos;
  write_json(dir / "config.json", config);
  write_json(dir / "generation_config.json", {{"bos_token_id", 1}, {"eos_token_id", eos}});

  int vocab_size = config["vocab_size"].get<int>();
  std::vector<std::string> names(static_cast<size_t>(vocab_size));
  for (int i = 0; i < vocab_size; ++i) names[size_t(i)] = "<t" + std::to_string(i) + ">";
  for (size_t i = 0; i < pieces.size(); ++i) names[size_t(cont[i])] = pieces[i];
  std::set<int> used(prompt.begin(), prompt.end());
  used.insert(cont.begin(), cont.end());
  int next = vocab_size - 1;
  for (const char* bracket : {"[", "]"}) {
    while (used.count(next)) --next;
    names[size_t(next--)] = bracket;
  }
  json vocab = json::object(), added = json::array();
  for (int i = 0; i < vocab_size; ++i) {
    const std::string& n = names[size_t(i)];
    vocab[n] = i;
    added.push_back({{"id", i},
                     {"content", n},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", special.count(n) > 0 || i == eos}});
  }
  write_json(dir / "tokenizer.json",
             {{"version", "1.0"},
              {"added_tokens", added},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", {{"type", "Fuse"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}});
  std::string tmpl = "{# Tools are called as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>. #}";
  for (int id : prompt) tmpl += names[size_t(id)];
  write_json(dir / "tokenizer_config.json", json{{"chat_template", tmpl}, {"eos_token", names[size_t(eos)]}});
  return dir;
}

// The fixture's prompt for `pieces`, found by a server of the plain model, and the model directory
// answering them; empty (with a failure recorded) when none is found.
fs::path tool_model(const std::string& name, const std::vector<std::string>& pieces, const std::set<std::string>& special) {
  std::vector<int> prompt, cont;
  {
    ServerProcess plain("-m " + llama().string() + " -t 1 --kv-cache-memory 8MiB --no-log-requests");
    if (!plain.wait_healthy()) {
      ADD_FAILURE() << plain.log();
      return {};
    }
    std::tie(prompt, cont) = find_prompt(plain.base_url(), pieces.size());
    EXPECT_EQ(plain.stop(), 0) << plain.log();
  }
  if (cont.empty()) {
    ADD_FAILURE() << "no prompt of the fixture model continues with distinct tokens";
    return {};
  }
  return write_model(prompt, cont, name, pieces, special);
}

TEST(ServerE2E, OpenAiClientToolCallsAndReasoning) {
  if (node_modules_dir().empty()) GTEST_SKIP() << "tests/node_modules is absent (run npm ci in tests/)";
  fs::path dir = tool_model("tool-llama", kPieces, kSpecial);
  ASSERT_FALSE(dir.empty());

  // Formats inferred from the template and vocabulary: hermes tool calls, <think> reasoning.
  ServerProcess srv("-m " + dir.string() + " -t 1 --kv-cache-memory 8MiB");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  EXPECT_NE(srv.log().find("tool calls 'hermes', reasoning 'think'"), std::string::npos) << srv.log();
  NodeResult r = run_node("tools_client.js", srv.base_url() + " tool-llama");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());
  // The call cut by max_tokens was dropped with a warning naming the response (both requests).
  std::string log = srv.log();
  size_t dropped = 0;
  for (size_t p = 0;
       (p = log.find("dropped: <tool_call>{\"name\": \"get_weather\", ", p)) != std::string::npos;
       ++p, ++dropped)
    EXPECT_EQ(log.compare(log.rfind('\n', p) + 1, 8, "chatcmpl"), 0) << log;
  EXPECT_EQ(dropped, 2u) << log;
  EXPECT_EQ(srv.stop(), 0) << srv.log();

  // --tool-parser none / --reasoning-parser none: plain content, special tokens skipped as before.
  ServerProcess off("-m " + dir.string() +
                    " -t 1 --kv-cache-memory 8MiB --tool-parser none --reasoning-parser none");
  ASSERT_TRUE(off.wait_healthy()) << off.log();
  NodeResult o = run_node("tools_client.js", off.base_url() + " tool-llama parsers-off");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  std::printf("%s", o.output.c_str());
  EXPECT_EQ(off.stop(), 0) << off.log();

  ServerProcess bad("-m " + dir.string() + " --tool-parser no-such-format");
  EXPECT_FALSE(bad.wait_healthy(2));
  EXPECT_NE(bad.stop(), 0);
  EXPECT_NE(bad.log().find("no-such-format"), std::string::npos) << bad.log();
}

// Structured output after a reasoning block whose open tag is two tokens (Gemma 4's): the
// first token opens it, the second is held to the tag, the block stays free, and the grammar
// holds what follows its close tag.
TEST(ServerE2E, OpenAiClientReasoningTagOfTwoTokens) {
  if (node_modules_dir().empty()) GTEST_SKIP() << "tests/node_modules is absent (run npm ci in tests/)";
  fs::path dir = tool_model("tool-llama-gemma-tags", kGemmaPieces, kGemmaSpecial);
  ASSERT_FALSE(dir.empty());
  ServerProcess srv("-m " + dir.string() + " -t 1 --kv-cache-memory 8MiB --reasoning-parser gemma4");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  NodeResult r = run_node("tools_client.js", srv.base_url() + " tool-llama-gemma-tags two-token-tag");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

}  // namespace

// End to end: the real `tessera serve` on fixture models, driven by the official OpenAI client
// and raw HTTP (Node scripts in tests/server/js).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "server_process.h"
#include "testutil.h"

using namespace tessera::test;

namespace {

std::string fixture(const std::string& name) {
  return (fixtures_dir() / "models" / name).string();
}

#define REQUIRE_NODE_MODULES()                                                                             \
  do {                                                                                                     \
    if (node_modules_dir().empty()) GTEST_SKIP() << "tests/node_modules is absent (run npm ci in tests/)"; \
  } while (0)

void expect_node_passes(const std::string& script, const std::string& args) {
  NodeResult r = run_node(script, args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::printf("%s", r.output.c_str());
}

TEST(ServerE2E, OpenAiClientCompletions) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + fixture("llama") + " -t 2 --kv-cache-memory 8MiB --api-key sk-test");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("completions_client.js", srv.base_url() + " llama sk-test");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerE2E, EveryErrorPathAnswersInOpenAisShape) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + fixture("qwen3") +
                    " -t 1 --kv-cache-memory 8MiB --api-key sk-test --max-body-size 65536"
                    " --served-model-name tiny");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("errors.js", srv.base_url() + " tiny sk-test");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerE2E, ManyConcurrentStreamsAndClientsLeavingMidStream) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + fixture("llama") +
                    " -t 1 --kv-cache-memory 32MiB --max-num-seqs 256 --no-log-requests");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("load.js", srv.base_url() + " llama 256 32 8");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerE2E, MemoryPressurePreemptsInsteadOfFailing) {
  REQUIRE_NODE_MODULES();
  // 21 KV blocks of 16 tokens; 16 streams of 16 + 60 tokens need 80.
  ServerProcess srv("-m " + fixture("llama") + " -t 1 --kv-cache-memory 256KiB --no-log-requests");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("load.js", srv.base_url() + " llama 16 0 60 expect-preemption");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerE2E, ABurstBeyondTheQueueIsRefusedWith429) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + fixture("llama") + " -t 1 --kv-cache-memory 8MiB --max-num-seqs 2 --max-queue 2");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("busy.js", srv.base_url() + " llama 24");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

std::string kjv() {
  return (std::filesystem::path(TESSERA_SOURCE_DIR) / "models" / "tessera-kjv").string();
}

TEST(ServerE2E, OpenAiClientTextCompletions) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + kjv() + " -t 2 --kv-cache-memory 64MiB");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("text_client.js", srv.base_url() + " tessera-kjv");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerE2E, OpenAiClientChat) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + kjv() + " -t 2 --kv-cache-memory 64MiB");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("chat_client.js", srv.base_url() + " tessera-kjv 1");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerE2E, OpenAiClientStructuredOutput) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + kjv() + " -t 2 --kv-cache-memory 64MiB --no-log-requests");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("structured_client.js", srv.base_url() + " tessera-kjv");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerE2E, PrefixCachingShortensTheSecondTurn) {
  REQUIRE_NODE_MODULES();
  ServerProcess srv("-m " + kjv() + " -t 2 --kv-cache-memory 64MiB --no-log-requests");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  expect_node_passes("prefix_cache.js", srv.base_url() + " tessera-kjv");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

// vLLM's --chat-template: the file replaces the model's template, with the model's special
// tokens as its variables, for chats and /tokenize alike, and the tool-call format is inferred
// from it; a missing file is refused at start.
TEST(ServerE2E, ChatTemplateFileReplacesTheModels) {
  const auto file =
      std::filesystem::temp_directory_path() / ("tessera_tmpl_" + std::to_string(::getpid()) + ".jinja");
  std::ofstream(file) << "{#- calls as <tool_call> -#}{{ bos_token }}[custom]{% for m in messages %}{{ "
                         "m.content }}|{% endfor %}";
  ServerProcess srv("-m " + kjv() + " -t 2 --kv-cache-memory 16MiB --chat-template " + file.string());
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  httplib::Client cli("127.0.0.1", srv.port());
  const std::string messages = R"("messages": [{"role": "user", "content": "In the beginning"}])";
  auto tok = cli.Post("/tokenize", "{" + messages + "}", "application/json");
  ASSERT_TRUE(tok && tok->status == 200) << (tok ? tok->body : "no answer");
  auto ids = nlohmann::json::parse(tok->body)["tokens"];
  auto text = cli.Post("/detokenize", nlohmann::json{{"tokens", ids}}.dump(), "application/json");
  ASSERT_TRUE(text && text->status == 200);
  EXPECT_EQ(nlohmann::json::parse(text->body)["prompt"], "<|bos|>[custom]In the beginning|");
  auto chat =
      cli.Post("/v1/chat/completions", "{" + messages + R"(, "max_tokens": 2, "return_token_ids": true})",
               "application/json");
  ASSERT_TRUE(chat && chat->status == 200) << (chat ? chat->body : "no answer");
  EXPECT_EQ(nlohmann::json::parse(chat->body)["prompt_token_ids"][0], ids);
  EXPECT_EQ(srv.stop(), 0) << srv.log();
  // The formats are inferred from the file's template, not the model's.
  EXPECT_NE(srv.log().find("tool calls 'hermes'"), std::string::npos) << srv.log();
  std::filesystem::remove(file);

  ServerProcess missing("-m " + kjv() + " --chat-template " + file.string());
  EXPECT_FALSE(missing.wait_healthy(2));
  EXPECT_NE(missing.stop(), 0);
  EXPECT_NE(missing.log().find("--chat-template"), std::string::npos) << missing.log();
}

// An MLX-quantized checkpoint served: the llama fixture with every projection as 8-bit codes (each
// weight's nearest code in a group's range). It loads, says that the CPU keeps the codes, and answers.
TEST(ServerE2E, ServesAnMlxQuantizedCheckpoint) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_mlx_serve_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto config = nlohmann::json::parse(
      tessera::test::read_file(std::filesystem::path(fixture("llama")) / "config.json"));
  config["quantization"] = {{"group_size", 32}, {"bits", 8}};
  std::ofstream(dir / "config.json") << config.dump();
  tessera::WeightStore weights(fixture("llama"));
  std::vector<std::pair<std::string, tessera::Tensor>> out;
  for (const std::string& name : weights.names()) {
    tessera::Tensor w = weights.get(name);
    if (name.find("_proj.weight") == std::string::npos) {
      out.emplace_back(name, w);
      continue;
    }
    const int64_t rows = w.dim(0), in = w.dim(1), groups = in / 32;
    tessera::Tensor codes = tessera::Tensor::empty(tessera::DType::U32, {rows, in / 4});
    tessera::Tensor scales = tessera::Tensor::empty(tessera::DType::F32, {rows, groups});
    tessera::Tensor biases = tessera::Tensor::empty(tessera::DType::F32, {rows, groups});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const float* v = w.data<float>() + r * in + g * 32;
        const float lo = *std::min_element(v, v + 32), hi = *std::max_element(v, v + 32);
        const float step = (hi - lo) / 255;
        scales.data<float>()[r * groups + g] = step, biases.data<float>()[r * groups + g] = lo;
        for (int i = 0; i < 32; ++i) {
          const uint32_t code = step > 0 ? uint32_t(std::lround((v[i] - lo) / step)) : 0;
          codes.data<uint32_t>()[(r * in + g * 32 + i) / 4] |= code << (8 * (i % 4));
        }
      }
    const std::string layer = name.substr(0, name.size() - 7);
    out.emplace_back(name, codes), out.emplace_back(layer + ".scales", scales),
        out.emplace_back(layer + ".biases", biases);
  }
  tessera::write_safetensors(dir / "model.safetensors", out);

  ServerProcess srv("-m " + dir.string() + " -t 2 --kv-cache-memory 8MiB");
  ASSERT_TRUE(srv.wait_healthy()) << srv.log();
  httplib::Client cli("127.0.0.1", srv.port());
  auto r = cli.Post("/v1/completions", R"({"prompt": [1, 17, 200], "max_tokens": 4, "temperature": 0})",
                    "application/json");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  EXPECT_EQ(nlohmann::json::parse(r->body)["usage"]["completion_tokens"], 4);
  EXPECT_EQ(srv.stop(), 0) << srv.log();
  EXPECT_NE(srv.log().find("MLX-quantized codes, mapped"), std::string::npos) << srv.log();
  std::filesystem::remove_all(dir);
}

TEST(ServerE2E, AModelThatFailsToLoadStopsTheServerWithTheReason) {
  ServerProcess srv("-m " + (fixtures_dir() / "models").string());
  EXPECT_FALSE(srv.wait_healthy(2));
  EXPECT_NE(srv.stop(), 0);
  EXPECT_NE(srv.log().find("config.json"), std::string::npos) << srv.log();
}

}  // namespace

// End to end: the real `tessera serve` on fixture models, driven by the official OpenAI client
// and raw HTTP (Node scripts in tests/server/js).
#include <gtest/gtest.h>

#include <filesystem>

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

TEST(ServerE2E, AModelThatFailsToLoadStopsTheServerWithTheReason) {
  ServerProcess srv("-m " + (fixtures_dir() / "models").string());
  EXPECT_FALSE(srv.wait_healthy(2));
  EXPECT_NE(srv.stop(), 0);
  EXPECT_NE(srv.log().find("config.json"), std::string::npos) << srv.log();
}

}  // namespace

// The server in-process: readiness before and after the model, and its routes over HTTP.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "model_testutil.h"
#include "server/server.h"
#include "testutil.h"

using namespace tessera;
using nlohmann::json;

namespace {

// A model that fails to load stops the server right after start(), possibly before its listen
// loop has begun; stop() must still return.
TEST(ServerHttp, StopRightAfterStartReturns) {
  for (int i = 0; i < 200; ++i) {
    server::ServerConfig sc;
    sc.port = 0;
    sc.log_requests = false;
    server::Server srv(sc);
    srv.start();
    auto stopped = std::async(std::launch::async, [&] { srv.stop(); });
    ASSERT_EQ(stopped.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "round " << i;
  }
}

TEST(ServerHttp, HealthIs503UntilTheModelIsSetThen200) {
  server::ServerConfig sc;
  sc.port = 0;
  sc.served_model_name = "tiny";
  sc.log_requests = false;
  server::Server srv(sc);
  int port = srv.start();
  httplib::Client cli("127.0.0.1", port);

  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(json::parse(health->body)["error"]["code"], 503);
  auto early = cli.Post("/v1/completions", R"({"prompt": [1, 2], "max_tokens": 2})", "application/json");
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 503);
  auto metrics = cli.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->body.find("tessera_kv_blocks_used"), std::string::npos);  // no engine yet

  test::TestModel m = test::load_test_model(test::fixtures_dir() / "models" / "qwen2");
  EngineConfig ec;
  ec.num_blocks = 32;
  AsyncEngine engine(std::make_unique<Engine>(m.model(), *m.backend, ec));
  server::ModelInfo info;
  info.vocab_size = m.model().vocab_size();
  info.max_model_len = m.model().max_context();
  info.kv_capacity_tokens = 32 * 16;
  info.max_num_seqs = 4;
  info.defaults.temperature = 0;
  srv.set_model(engine, nullptr, info);

  EXPECT_EQ(cli.Get("/health")->status, 200);
  auto r = cli.Post("/v1/completions", R"({"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 3})",
                    "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json body = json::parse(r->body);
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  // The engine thread publishes its stats just after delivering the last token.
  bool idle = false;
  for (int i = 0; i < 100 && !idle; ++i) {
    idle = cli.Get("/metrics")->body.find("tessera_kv_blocks_used 0\n") != std::string::npos;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(idle);
  srv.stop();
}

}  // namespace

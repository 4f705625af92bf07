// The OpenAI-compatible HTTP server: routes, auth, limits and errors. It starts before the
// model is loaded (GET /health answers 503 until set_model), and never runs model code: each
// request is prepared on its HTTP thread and handed to the AsyncEngine.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "server/text_codec.h"

namespace tessera::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port
  std::string api_key;  // empty: no auth
  std::string served_model_name;
  size_t max_body_bytes = 16u << 20;      // larger bodies: 413
  int max_queue = 512;                    // sequences waiting beyond the running seats: 429 past it
  int http_threads = 0;                   // 0: enough for every running and waiting sequence
  std::chrono::seconds write_timeout{5};  // a client that takes nothing for this long is dropped
  bool log_requests = true;               // one line per finished request on stderr
};

// What the server needs to know about the loaded model.
struct ModelInfo {
  int vocab_size = 0;
  int max_model_len = 0;
  int64_t kv_capacity_tokens = 0;
  int max_num_seqs = 0;
  std::vector<int32_t> eos_ids;
  SamplingParams defaults;  // generation_config.json's sampling defaults
  // Formats of tools::make_parser for chat output ("": that kind of parsing is off).
  std::string tool_format;
  std::string reasoning_format;
};

class Server {
 public:
  explicit Server(ServerConfig cfg);
  ~Server();
  // Binds host:port and serves on a background thread; returns the bound port.
  int start();
  // The model is ready: /health turns 200 and the API starts answering. The engine and the
  // codec (null: token-id prompts only) must outlive the server.
  void set_model(AsyncEngine& engine, const TextCodec* codec, ModelInfo info);
  void stop();

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace tessera::server

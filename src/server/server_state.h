// Internal to the server: what the route handlers share.
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/server.h"
#include "server/stream_writer.h"

namespace tessera::server {

// Seconds since the Unix epoch: the OpenAI objects' "created".
inline int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Server::State {
  ServerConfig cfg;
  const int64_t started = unix_seconds();  // the served model's "created" in /v1/models
  Metrics metrics;
  std::atomic<bool> ready{false};
  AsyncEngine* engine = nullptr;  // set once, before `ready`
  const TextCodec* codec = nullptr;
  ModelInfo info;
  std::atomic<int64_t> next_id{1};
  std::unique_ptr<StreamWriter> writer;  // writes every streaming response
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
  std::atomic<bool> listening_ended{false};  // listen_after_bind has returned
};

// POST /v1/chat/completions and /v1/completions (completions.cpp).
void handle_generation(Server::State& st, Endpoint endpoint, const httplib::Request& req,
                       httplib::Response& res);
// Sets an OpenAI error body and status.
void set_error(httplib::Response& res, int status, const std::string& message, const std::string& param = "");

}  // namespace tessera::server

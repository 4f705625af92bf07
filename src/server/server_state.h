// Internal to the server: what the route handlers share.
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/api_error.h"
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
// POST /tokenize and /detokenize (tokenize.cpp).
void handle_tokenize(const Server::State& st, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(const Server::State& st, const httplib::Request& req, httplib::Response& res);

// What every route that reads a body does first (server.cpp): the body as JSON, else ApiError 400;
// and, for a request naming `model` (empty: none), ApiError 404 unless it is the served one and
// 503 while it loads.
nlohmann::json request_json(const std::string& body);
void check_served_model(const Server::State& st, const std::string& model);
// ApiError 400 naming `field` unless token id `id` is in the served model's vocabulary.
void check_token(const Server::State& st, int32_t id, const char* field);
void set_json(httplib::Response& res, const nlohmann::json& j);
// Sets an OpenAI error body and status.
void set_error(httplib::Response& res, int status, const std::string& message, const std::string& param = "");
void set_error(httplib::Response& res, const ApiError& e);

}  // namespace tessera::server

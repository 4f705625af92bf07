#include "server/server.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/server_state.h"

namespace tessera::server {
namespace {

using nlohmann::json;

bool authorized(const Server::State& st, const httplib::Request& req) {
  if (st.cfg.api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + st.cfg.api_key;
}

bool has_body(const httplib::Request& req) {
  auto len = req.get_header_value("Content-Length");
  return (!len.empty() && len != "0") || req.get_header_value("Transfer-Encoding") == "chunked";
}

}  // namespace

void set_json(httplib::Response& res, const json& j) {
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void set_error(httplib::Response& res, int status, const std::string& message, const std::string& param) {
  res.status = status;
  set_json(res, error_body(status, message, param));
}

void set_error(httplib::Response& res, const ApiError& e) {
  set_error(res, e.status(), e.what(), e.param());
}

json request_json(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  return j;
}

void check_token(const Server::State& st, int32_t id, const char* field) {
  if (id >= st.info.vocab_size)
    throw ApiError(400,
                   "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                       std::to_string(st.info.vocab_size) + ")",
                   field);
}

void check_served_model(const Server::State& st, const std::string& model) {
  if (!model.empty() && model != st.cfg.served_model_name)
    throw ApiError(404,
                   "the model '" + model + "' does not exist (this server serves '" + st.cfg.served_model_name + "')",
                   "model");
  if (!st.ready) throw ApiError(503, "the model is loading");
}

Server::Server(ServerConfig cfg) : state_(std::make_unique<State>()) {
  state_->cfg = std::move(cfg);
}

Server::~Server() {
  stop();
}

void Server::set_model(AsyncEngine& engine, const TextCodec* codec, ModelInfo info) {
  state_->engine = &engine;
  state_->codec = codec;
  state_->info = std::move(info);
  state_->ready = true;
}

int Server::start() {
  State& st = *state_;
  auto http = std::make_unique<HttpServer>();
  int threads = st.cfg.http_threads > 0 ? st.cfg.http_threads : 64 + 256 + st.cfg.max_queue;
  // Every streaming client holds a thread for its whole response.
  http->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http->set_payload_max_length(st.cfg.max_body_bytes);
  http->set_keep_alive_timeout(5);
  http->set_read_timeout(30);
  // A client that takes nothing for this long is dropped (the SSE writer does the same).
  http->set_write_timeout(st.cfg.write_timeout);

  // Errors httplib produces itself (404 route, 413 body, 400 bad request) get OpenAI bodies.
  http->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 404   ? "no route for " + req.method + " " + req.path
                      : res.status == 413 ? "the request body is too large"
                                          : "bad request";
    set_error(res, res.status, msg);
  });
  http->set_exception_handler([&st](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    st.metrics.count_request(500);
    set_error(res, 500, what);
  });
  // /v1 routes need the API key when one is set. A request with a body is answered by its
  // route, after httplib has read the body: answering before would leave the body on a kept-alive
  // connection, to be misread as the next request.
  auto reject_unauthorized = [&st](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) != 0 || authorized(st, req)) return false;
    st.metrics.count_request(401);
    set_error(res, 401, "invalid or missing API key (send 'Authorization: Bearer <key>')");
    return true;
  };
  http->set_pre_routing_handler([reject_unauthorized](const httplib::Request& req, httplib::Response& res) {
    return !has_body(req) && reject_unauthorized(req, res) ? httplib::Server::HandlerResponse::Handled
                                                           : httplib::Server::HandlerResponse::Unhandled;
  });
  // A client that asks before sending its body (Expect: 100-continue, as curl does for large
  // ones) hears at once of a body over the limit or a missing API key, and sends nothing; the
  // connection then closes, so that a body sent anyway is not read as a request.
  http->set_expect_100_continue_handler([&st, reject_unauthorized](const httplib::Request& req, httplib::Response& res) {
    int status = 100;
    if (req.get_header_value<uint64_t>("Content-Length") > st.cfg.max_body_bytes) {
      set_error(res, 413, "the request body is too large");
      status = 413;
    } else if (reject_unauthorized(req, res)) {
      status = 401;
    }
    if (status != 100) res.set_header("Connection", "close");
    return status;
  });

  http->Get("/health", [&st](const httplib::Request&, httplib::Response& res) {
    if (st.ready)
      res.set_content("{}", "application/json");
    else
      set_error(res, 503, "the model is loading");
  });
  http->Get("/metrics", [&st](const httplib::Request&, httplib::Response& res) {
    AsyncEngineStats s;
    if (st.ready) s = st.engine->stats();
    res.set_content(st.metrics.render(st.ready ? &s : nullptr), "text/plain; version=0.0.4");
  });
  http->Get("/v1/models", [&st](const httplib::Request&, httplib::Response& res) {
    json model = {
        {"id", st.cfg.served_model_name}, {"object", "model"}, {"created", st.started}, {"owned_by", "tessera"}};
    if (st.ready) model["max_model_len"] = st.info.max_model_len;
    set_json(res, {{"object", "list"}, {"data", json::array({model})}});
  });
  http->Post("/v1/chat/completions",
             [&st, reject_unauthorized](const httplib::Request& req, httplib::Response& res) {
               if (!reject_unauthorized(req, res)) handle_generation(st, Endpoint::Chat, req, res);
             });
  http->Post("/v1/completions",
             [&st, reject_unauthorized](const httplib::Request& req, httplib::Response& res) {
               if (!reject_unauthorized(req, res)) handle_generation(st, Endpoint::Completion, req, res);
             });
  // vLLM's tokenizer routes, outside /v1 as there (no API key).
  http->Post("/tokenize", [&st](const httplib::Request& req, httplib::Response& res) { handle_tokenize(st, req, res); });
  http->Post("/detokenize",
             [&st](const httplib::Request& req, httplib::Response& res) { handle_detokenize(st, req, res); });

  int port = st.cfg.port;
  if (port == 0)
    port = http->bind_to_any_port(st.cfg.host);
  else if (!http->bind_to_port(st.cfg.host, port))
    port = -1;
  TESSERA_CHECK(port > 0, "cannot listen on " + st.cfg.host + ":" + std::to_string(st.cfg.port) +
                              " (address in use or not available)");
  http->raise_backlog(1024);
  st.writer = std::make_unique<StreamWriter>(st.cfg.write_timeout);
  st.http = std::move(http);
  st.thread = std::thread([&st] {
    pthread_setname_np(pthread_self(), "tessera-http");  // the connection threads it starts inherit it
    st.http->listen_after_bind();
    st.listening_ended = true;
  });
  return port;
}

void Server::stop() {
  State& st = *state_;
  if (st.writer) st.writer->stop();  // releases the connections blocked in streaming responses
  // httplib's stop() does nothing before its listen loop has begun (a model that fails to load
  // at once stops the server that early): repeat it until the loop has ended.
  if (st.http && st.thread.joinable())
    while (!st.listening_ended) {
      st.http->stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  if (st.thread.joinable()) st.thread.join();
}

}  // namespace tessera::server

// Load generator for the HTTP server: concurrent streaming clients against an in-process
// server (or --url), next to the engine alone running the same requests in the same batch.
// Prints throughput, TTFT and inter-token latency (p50/p99) per concurrency, and the server's
// overhead (HTTP + JSON + SSE) relative to the engine alone.
#include <httplib.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <tuple>

#include "engine/async_engine.h"
#include "models/model.h"
#include "server/server.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// CPU time of the whole process (engine, server and client threads), seconds.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Run {
  double wall_s = 0;
  double cpu_s = 0;
  int64_t tokens = 0;
  int errors = 0;
  std::vector<double> ttft, itl;  // seconds
  double tok_per_s() const { return wall_s > 0 ? double(tokens) / wall_s : 0; }
  double cpu_us_per_token() const { return tokens > 0 ? cpu_s * 1e6 / double(tokens) : 0; }
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

std::vector<int32_t> prompt_for(int i, int len) {
  std::vector<int32_t> p;
  for (int k = 0; k < len; ++k) p.push_back(3 + (k * 37 + i * 101) % 250);
  return p;
}

// The requests run `rounds` times by each of `clients` concurrent clients.
struct Load {
  int clients, rounds, prompt_len, max_tokens;
};

Request make_request(const Load& l, int i) {
  Request r;
  r.prompt = prompt_for(i, l.prompt_len);
  r.max_tokens = l.max_tokens;
  r.params.temperature = 0.8f;
  r.seed = uint64_t(i);
  return r;
}

// The engine alone: each round submits one request per client and steps until all finish.
Run run_engine(Engine& engine, const Load& l) {
  Run run;
  auto t0 = Clock::now();
  double cpu0 = cpu_seconds();
  for (int round = 0; round < l.rounds; ++round) {
    std::unordered_map<int64_t, Clock::time_point> last;
    auto start = Clock::now();
    for (int c = 0; c < l.clients; ++c)
      last[engine.add_request(make_request(l, round * l.clients + c))] = start;
    while (engine.has_work()) {
      auto outs = engine.step();
      auto now = Clock::now();
      for (auto& o : outs) {
        auto& t = last[o.seq_id];
        (t == start ? run.ttft : run.itl).push_back(since(t, now));
        t = now;
        ++run.tokens;
        if (o.finished) engine.release(o.seq_id);
      }
    }
  }
  run.wall_s = since(t0, Clock::now());
  run.cpu_s = cpu_seconds() - cpu0;
  return run;
}

// The engine thread without HTTP: one in-process client thread per stream, as the server has.
Run run_async(AsyncEngine& async, const Load& l) {
  Run run;
  std::mutex mu;
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  double cpu0 = cpu_seconds();
  for (int c = 0; c < l.clients; ++c)
    threads.emplace_back([&, c] {
      Run mine;
      for (int round = 0; round < l.rounds; ++round) {
        auto start = Clock::now(), last = start;
        auto stream = async.submit({make_request(l, round * l.clients + c)});
        for (bool done = false; !done;)
          for (auto& e : stream->wait(std::chrono::milliseconds(100))) {
            auto now = Clock::now();
            (mine.tokens % l.max_tokens == 0 ? mine.ttft : mine.itl).push_back(since(last, now));
            last = now;
            ++mine.tokens;
            done = e.finished || !e.error.empty();
            mine.errors += !e.error.empty();
          }
      }
      std::lock_guard lk(mu);
      run.tokens += mine.tokens;
      run.errors += mine.errors;
      run.ttft.insert(run.ttft.end(), mine.ttft.begin(), mine.ttft.end());
      run.itl.insert(run.itl.end(), mine.itl.begin(), mine.itl.end());
    });
  for (auto& t : threads) t.join();
  run.wall_s = since(t0, Clock::now());
  run.cpu_s = cpu_seconds() - cpu0;
  return run;
}

// One streaming client: `rounds` requests in a row, timing every SSE event.
void client(const std::string& host, int port, const Load& l, int c, Run& out, std::mutex& mu) {
  httplib::Client cli(host, port);
  cli.set_read_timeout(600);
  Run mine;
  for (int round = 0; round < l.rounds; ++round) {
    Request r = make_request(l, round * l.clients + c);
    nlohmann::json body = {{"prompt", r.prompt},      {"max_tokens", l.max_tokens}, {"temperature", 0.8},
                           {"seed", *r.seed},         {"ignore_eos", true},         {"stream", true},
                           {"return_token_ids", true}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    auto start = Clock::now(), last = start;
    int64_t got = 0;
    std::string buf;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buf.append(data, n);
      auto now = Clock::now();
      size_t at;
      while ((at = buf.find("\n\n")) != std::string::npos) {
        // Tokens in this event: the ids in its "token_ids":[...] (counted, not parsed).
        size_t ids = buf.find("\"token_ids\":[");
        int k = 0;
        if (ids != std::string::npos && ids < at) {
          size_t end = buf.find(']', ids);
          if (end > ids + 13) k = 1 + int(std::count(buf.begin() + long(ids), buf.begin() + long(end), ','));
        }
        for (int i = 0; i < k; ++i) {
          double gap = since(last, now) / k;
          (got == 0 && i == 0 ? mine.ttft : mine.itl).push_back(got == 0 && i == 0 ? since(start, now) : gap);
          ++got;
        }
        if (k) last = now;
        buf.erase(0, at + 2);
      }
      return true;
    };
    httplib::Response res;
    httplib::Error err;
    if (!cli.send(req, res, err) || res.status != 200 || got != l.max_tokens) ++mine.errors;
    mine.tokens += got;
  }
  std::lock_guard lk(mu);
  out.tokens += mine.tokens;
  out.errors += mine.errors;
  out.ttft.insert(out.ttft.end(), mine.ttft.begin(), mine.ttft.end());
  out.itl.insert(out.itl.end(), mine.itl.begin(), mine.itl.end());
}

Run run_clients(const std::string& host, int port, const Load& l) {
  Run run;
  std::mutex mu;
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  double cpu0 = cpu_seconds();
  for (int c = 0; c < l.clients; ++c) threads.emplace_back([&, c] { client(host, port, l, c, run, mu); });
  for (auto& t : threads) t.join();
  run.wall_s = since(t0, Clock::now());
  run.cpu_s = cpu_seconds() - cpu0;
  return run;
}

void print_row(const char* what, const Load& l, const Run& r) {
  std::printf("| %-6s | %7d | %6lld | %8.1f | %11.1f | %11.1f | %10.2f | %10.2f | %9.1f | %6d |\n", what,
              l.clients, (long long)r.tokens, r.tok_per_s(), percentile(r.ttft, 0.5) * 1e3,
              percentile(r.ttft, 0.99) * 1e3, percentile(r.itl, 0.5) * 1e3, percentile(r.itl, 0.99) * 1e3,
              r.cpu_us_per_token(), r.errors);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Server load generator: throughput, TTFT and inter-token latency at several concurrencies"};
  std::string model_dir = TESSERA_SOURCE_DIR "/models/tessera-kjv", url;
  std::vector<int> concurrency = {1, 16, 64, 256};
  int threads = 0, prompt_len = 32, max_tokens = 64, min_requests = 16, repeats = 3;
  app.add_option("-m,--model", model_dir, "Model directory");
  app.add_option("--url", url, "Drive a running server (host:port) instead of an in-process one");
  app.add_option("-c,--concurrency", concurrency, "Concurrent streams")->delimiter(',');
  app.add_option("-t,--threads", threads, "Engine CPU threads (default: all cores)");
  app.add_option("--prompt-len", prompt_len, "Prompt tokens per request");
  app.add_option("--max-tokens", max_tokens, "Generated tokens per request");
  app.add_option("--min-requests", min_requests, "Clients repeat requests until at least this many ran");
  app.add_option("--repeats", repeats, "Runs per row; the fastest is shown (the machine may be shared)");
  CLI11_PARSE(app, argc, argv);

  auto be = make_cpu_backend({.reference = false, .threads = threads});
  LoadedModel lm = load_model(model_dir, *be);
  int max_c = *std::max_element(concurrency.begin(), concurrency.end());
  EngineConfig ec;
  ec.scheduler.max_num_seqs = std::max(256, max_c);
  ec.num_blocks = max_c * ((prompt_len + max_tokens + 15) / 16 + 1) + 64;

  std::unique_ptr<Engine> alone = url.empty() ? std::make_unique<Engine>(*lm.model, *be, ec) : nullptr;
  std::unique_ptr<AsyncEngine> async;
  std::unique_ptr<server::Server> srv;
  std::string host = "127.0.0.1";
  int port = 0;
  if (url.empty()) {
    async = std::make_unique<AsyncEngine>(std::make_unique<Engine>(*lm.model, *be, ec));
    server::ServerConfig sc;
    sc.port = 0;
    sc.served_model_name = "bench";
    sc.log_requests = false;
    sc.http_threads = max_c + 32;
    srv = std::make_unique<server::Server>(sc);
    port = srv->start();
    server::ModelInfo info;
    info.vocab_size = lm.model->vocab_size();
    info.max_model_len = lm.model->max_context();
    info.kv_capacity_tokens = int64_t(ec.num_blocks) * ec.block_size;
    info.max_num_seqs = ec.scheduler.max_num_seqs;
    srv->set_model(*async, nullptr, info);
  } else {
    host = url.substr(0, url.rfind(':'));
    port = std::stoi(url.substr(url.rfind(':') + 1));
  }

  std::printf("model %s, prompt %d tokens, %d generated per request (temperature 0.8, EOS ignored)\n\n",
              model_dir.c_str(), prompt_len, max_tokens);
  std::printf(
      "| path   | streams | tokens | tok/s    | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | CPU "
      "us/tok | errors |\n");
  std::printf(
      "|--------|---------|--------|----------|-------------|-------------|------------|------------|--------"
      "---|--------|\n");
  // The engine alone gets its own engine on the same model; it and the server's engine thread
  // never run at the same time. Both are warmed up (first-touch of the KV cache) before timing.
  Load warm{max_c, 1, prompt_len, 4};
  if (alone) run_engine(*alone, warm);
  run_clients(host, port, warm);
  std::vector<std::tuple<int, double, double>> overheads;
  for (int c : concurrency) {
    Load l{c, std::max(1, (min_requests + c - 1) / c), prompt_len, max_tokens};
    // The paths take turns, so that load from elsewhere on the machine hits them alike; the
    // fastest run of each is kept.
    Run e, a, s;
    auto keep = [](Run& b, Run r) {
      if (b.wall_s == 0 || r.tok_per_s() > b.tok_per_s()) b = std::move(r);
    };
    for (int i = 0; i < repeats; ++i) {
      if (alone) {
        std::thread t([&] { keep(e, run_engine(*alone, l)); });  // on its own thread, as the engine thread is
        t.join();
        keep(a, run_async(*async, l));
      }
      keep(s, run_clients(host, port, l));
    }
    if (alone) {
      print_row("engine", l, e);
      print_row("async", l, a);
    }
    print_row("server", l, s);
    if (alone)
      overheads.push_back({c, (std::max(e.tok_per_s(), a.tok_per_s()) / s.tok_per_s() - 1) * 100,
                           (s.cpu_us_per_token() / a.cpu_us_per_token() - 1) * 100});
  }
  // The server against the faster of the two engine-alone paths, and in CPU per token against
  // the engine thread (the same work plus HTTP, JSON and SSE).
  for (auto [c, tput, cpu] : overheads)
    std::printf("\n%d streams: server overhead %+.1f%% in throughput, %+.1f%% in CPU per token", c, tput,
                cpu);
  std::printf("\n");
  if (srv) srv->stop();
  return 0;
}

// Load generator for the HTTP server: concurrent streaming clients against an in-process
// server (or --url), next to the engine alone and the engine thread running the same requests.
// Prints throughput, TTFT and inter-token latency (p50/p99) per concurrency; then the server's
// overhead (HTTP + JSON + SSE) at one batch: every path runs the same requests submitted
// together, timed per engine step while all of them decode, with the CPU time of the server's
// threads against the engine's.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "load_paths.h"
#include "models/model.h"
#include "random_llama.h"
#include "server/server.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

void print_row(const char* what, const Load& l, const Run& r) {
  double cpu = r.cpu.engine + r.cpu.server() + r.cpu.rest;
  std::printf("| %-6s | %7d | %6lld | %8.1f | %11.1f | %11.1f | %10.2f | %10.2f | %10.1f | %6d |\n", what,
              l.clients, (long long)r.tokens, r.tok_per_s(), percentile(r.ttft, 0.5) * 1e3,
              percentile(r.ttft, 0.99) * 1e3, percentile(r.itl, 0.5) * 1e3, percentile(r.itl, 0.99) * 1e3,
              r.tokens ? cpu * 1e6 / double(r.tokens) : 0.0, r.errors);
  std::fflush(stdout);
}

struct BatchStats {
  std::vector<double> step_ms;
  std::vector<CpuSplit> cpu;
  int errors = 0;
};

double median(std::vector<double> v) {
  return percentile(std::move(v), 0.5);
}

void print_batch_row(const char* what, const BatchStats& b, double engine_step) {
  auto field = [&](double CpuSplit::*f) {
    std::vector<double> v;
    for (const auto& c : b.cpu) v.push_back(c.*f);
    return median(v);
  };
  std::vector<double> ratio;
  for (const auto& c : b.cpu) ratio.push_back(c.engine > 0 ? c.server() / c.engine * 100 : 0);
  double step = median(b.step_ms);
  std::printf("| %-6s | %7.2f | %5.2f-%-5.2f | %+8.1f%% | %9.3f | %9.3f | %9.3f | %9.3f | %8.1f%% | %6d |\n",
              what, step, *std::min_element(b.step_ms.begin(), b.step_ms.end()),
              *std::max_element(b.step_ms.begin(), b.step_ms.end()), (step / engine_step - 1) * 100,
              field(&CpuSplit::engine), field(&CpuSplit::http), field(&CpuSplit::sse), field(&CpuSplit::rest),
              median(ratio), b.errors);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Server load generator: throughput, latency and the server's overhead at one batch"};
  std::string model_dir = TESSERA_SOURCE_DIR "/models/tessera-kjv", url;
  std::vector<int> concurrency = {1, 16, 64, 256};
  int threads = 0, prompt_len = 32, max_tokens = 64, min_requests = 16, repeats = 3;
  int batch = 64, batch_tokens = 128, batch_runs = 7;
  bool random_llama = false;
  int client_nice = 19;
  app.add_option("-m,--model", model_dir, "Model directory");
  app.add_flag("--random-llama", random_llama,
               "Instead of -m: a random Llama-shaped f32 model of ~20M parameters, written to a temp dir");
  app.add_option("--url", url, "Drive a running server (host:port) instead of an in-process one");
  app.add_option("-c,--concurrency", concurrency, "Concurrent streams (empty: skip the table)")
      ->delimiter(',');
  app.add_option("-t,--threads", threads, "Engine CPU threads (default: all cores)");
  app.add_option("--prompt-len", prompt_len, "Prompt tokens per request");
  app.add_option("--max-tokens", max_tokens, "Generated tokens per request");
  app.add_option("--min-requests", min_requests, "Clients repeat requests until at least this many ran");
  app.add_option("--repeats", repeats, "Runs per row; the fastest is shown (the machine may be shared)");
  app.add_option("--batch", batch, "Streams of the same-batch overhead comparison (0: skip it)");
  app.add_option("--batch-tokens", batch_tokens, "Generated tokens per request in that comparison");
  app.add_option("--batch-runs", batch_runs, "Runs per path in that comparison (the paths take turns)");
  app.add_option("--client-nice", client_nice, "Nice value of the client threads (0: as the server's)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  set_client_nice(client_nice);

  std::filesystem::path temp_model;
  if (random_llama) {
    temp_model = std::filesystem::temp_directory_path() / ("bench_server_llama_" + std::to_string(getpid()));
    write_random_llama(temp_model);
    model_dir = temp_model.string();
  }
  auto be = make_cpu_backend({.reference = false, .threads = threads});
  std::set<int> pool = pool_worker_tids();
  LoadedModel lm = load_model(model_dir, *be);
  int max_c = batch;
  for (int c : concurrency) max_c = std::max(max_c, c);
  int longest = std::max(max_tokens, batch_tokens);
  EngineConfig ec;
  ec.scheduler.max_num_seqs = std::max(256, max_c);
  ec.num_blocks = max_c * ((prompt_len + longest + 15) / 16 + 1) + 64;

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

  std::printf(
      "model %s, %zu engine threads, clients at nice %d, prompt %d tokens, temperature 0.8, EOS ignored\n\n",
      model_dir.c_str(), pool.size() + 1, client_nice, prompt_len);
  // The engine alone gets its own engine on the same model; it and the server's engine thread
  // never run at the same time. Both are warmed up (first-touch of the KV cache) before timing.
  Load warm{max_c, 1, prompt_len, 4};
  if (alone) run_engine(*alone, warm, pool);
  run_clients(host, port, warm, pool);

  if (!concurrency.empty()) {
    std::printf("%d generated tokens per request; CPU us/tok is the whole process per generated token\n\n",
                max_tokens);
    std::printf(
        "| path   | streams | tokens | tok/s    | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | CPU "
        "us/tok "
        "| errors |\n");
    std::printf(
        "|--------|--------:|-------:|---------:|------------:|------------:|-----------:|-----------:|------"
        "-----:"
        "|-------:|\n");
  }
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
        keep(e, run_engine(*alone, l, pool));
        keep(a, run_async(*async, l, pool));
      }
      keep(s, run_clients(host, port, l, pool));
    }
    if (alone) {
      print_row("engine", l, e);
      print_row("async", l, a);
    }
    print_row("server", l, s);
  }

  if (alone && batch > 0) {
    Load l{batch, 1, prompt_len, batch_tokens};
    BatchStats e, a, s;
    auto add = [](BatchStats& b, const Run& r) {
      b.step_ms.push_back(r.steady_step_ms());
      b.cpu.push_back(r.cpu);
      b.errors += r.errors;
    };
    for (int i = 0; i < batch_runs; ++i) {
      add(e, run_engine(*alone, l, pool));
      add(a, run_async(*async, l, pool));
      add(s, run_clients(host, port, l, pool));
    }
    std::printf(
        "\nSame batch: %d streams submitted together, %d tokens each; ms per engine step while all decode "
        "(median, min-max of %d runs, the paths taking turns); CPU seconds per run by thread (median)\n\n",
        batch, batch_tokens, batch_runs);
    std::printf(
        "| path   | step ms | min-max     | vs engine | engine s  | http s    | sse s     | other s   | "
        "server/engine CPU | errors |\n");
    std::printf(
        "|--------|--------:|-------------|----------:|----------:|----------:|----------:|----------:|"
        "------------------:|-------:|\n");
    double engine_step = median(e.step_ms);
    print_batch_row("engine", e, engine_step);
    print_batch_row("async", a, engine_step);
    print_batch_row("server", s, engine_step);
  }
  if (srv) srv->stop();
  if (!temp_model.empty()) std::filesystem::remove_all(temp_model);
  return 0;
}

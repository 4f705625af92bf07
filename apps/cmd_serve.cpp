// tessera serve: an OpenAI-compatible HTTP server over one model, with continuous batching.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "command.h"
#include "core/error.h"
#include "engine/async_engine.h"
#include "model_options.h"
#include "server/model_codec.h"
#include "server/server.h"
#include "tools/model_markers.h"
#include "tools/parser.h"

namespace tessera::app {
namespace {

using Clock = std::chrono::steady_clock;

// "512MiB", "2GiB", "1.5GB", or plain bytes.
size_t parse_size(const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw Error("--kv-cache-memory: \"" + s + "\" is not a size (e.g. 512MiB, 2GiB)");
  }
  std::string unit = s.substr(used);
  double mult = unit.empty() || unit == "B"    ? 1
                : unit == "KiB" || unit == "K" ? 1024.0
                : unit == "MiB" || unit == "M" ? 1024.0 * 1024
                : unit == "GiB" || unit == "G" ? 1024.0 * 1024 * 1024
                : unit == "KB"                 ? 1e3
                : unit == "MB"                 ? 1e6
                : unit == "GB"                 ? 1e9
                                               : -1;
  TESSERA_CHECK(mult > 0 && v > 0, "--kv-cache-memory: \"" + s + "\" is not a size (e.g. 512MiB, 2GiB)");
  return size_t(v * mult);
}

// OpenAI's defaults, overridden by what generation_config.json recommends (as vLLM does).
SamplingParams default_sampling(const HfConfig& cfg) {
  const auto& g = cfg.generation();
  SamplingParams p;
  auto num = [&](const char* k, float d) {
    return g.contains(k) && g[k].is_number() ? g[k].get<float>() : d;
  };
  p.temperature = num("temperature", 1.0f);
  p.top_p = num("top_p", 1.0f);
  p.top_k = int(num("top_k", 0));
  p.min_p = num("min_p", 0.0f);
  p.repetition_penalty = num("repetition_penalty", 1.0f);
  return p;
}

// The parser formats: the flags, else what the model's chat template and tokens show ("none"
// turns a kind off). Unknown names fail here, before the model loads.
void resolve_parsers(const std::string& model_dir, const std::string& template_file,
                     const std::string& tool_flag, const std::string& reasoning_flag,
                     server::ModelInfo& info) {
  tools::FormatGuess guess;
  if (tool_flag.empty() || reasoning_flag.empty()) {
    try {
      tools::ModelMarkers markers = tools::read_model_markers(model_dir);
      if (!template_file.empty()) markers.chat_template = read_text_file(template_file);
      guess = tools::infer_format(markers.chat_template, markers.added_tokens);
    } catch (const Error&) {
      // No chat template or tokenizer files: nothing to infer (chat is then unavailable anyway).
    }
  }
  auto pick = [](const std::string& flag, const std::string& inferred) {
    return flag == "none" ? std::string() : flag.empty() ? inferred : flag;
  };
  info.tool_format = pick(tool_flag, guess.tool);
  info.reasoning_format = pick(reasoning_flag, guess.reasoning);
  tools::ParserOptions o;
  o.tool_format = info.tool_format;
  o.reasoning_format = info.reasoning_format;
  tools::make_parser(o);  // throws naming an unknown format
}

// Loads the model, showing the elapsed time on a terminal.
LoadedRuntime load_with_progress(const ModelOptions& mo) {
  std::atomic<bool> done{false};
  std::thread ticker;
  auto t0 = Clock::now();
  if (isatty(STDERR_FILENO))
    ticker = std::thread([&] {
      while (!done) {
        std::fprintf(stderr, "\rloading %s ... %.1f s", mo.model_dir.c_str(),
                     std::chrono::duration<double>(Clock::now() - t0).count());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      std::fprintf(stderr, "\r\033[K");
    });
  else
    std::fprintf(stderr, "loading %s ...\n", mo.model_dir.c_str());
  try {
    LoadedRuntime rt = load_runtime(mo);
    done = true;
    if (ticker.joinable()) ticker.join();
    return rt;
  } catch (...) {
    done = true;
    if (ticker.joinable()) ticker.join();
    throw;
  }
}

int run(int argc, char** argv) {
  CLI::App app{"Serve a model over an OpenAI-compatible HTTP API", "tessera serve"};
  ModelOptions mo;
  add_model_options(app, mo);
  server::ServerConfig sc;
  EngineConfig ec;
  std::string kv_memory;
  app.add_option("--host", sc.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", sc.port, "Port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--api-key", sc.api_key, "Require 'Authorization: Bearer <key>' on /v1 routes");
  app.add_option("--served-model-name", sc.served_model_name,
                 "Model name clients ask for (default: the directory name)");
  app.add_option("--max-num-seqs", ec.scheduler.max_num_seqs, "Sequences running at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-num-batched-tokens", ec.scheduler.max_num_batched_tokens,
                 "Tokens computed per engine step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-queue", sc.max_queue, "Sequences allowed to wait beyond the running ones (then 429)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-cache-memory", kv_memory,
                 "Memory for the KV cache (e.g. 512MiB, 40GiB; default: 1GiB on the CPU, on a GPU what "
                 "--gpu-memory-utilization leaves after the weights and a profiled step)");
  app.add_option("--gpu-memory-utilization", ec.gpu_memory_utilization,
                 "Fraction of the GPU's memory for weights, activations and the KV cache")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--max-body-size", sc.max_body_bytes, "Largest request body in bytes (then 413)")
      ->capture_default_str();
  std::string tool_parser, reasoning_parser;
  app.add_option(
      "--tool-parser", tool_parser,
      "Tool-call format of chat output (e.g. hermes; none: off; default: inferred from the model)");
  app.add_option("--reasoning-parser", reasoning_parser,
                 "Reasoning format of chat output (e.g. qwen3; none: off; default: inferred from the model)");
  std::string chat_template;
  app.add_option("--chat-template", chat_template,
                 "A chat template file to use instead of the model's (its tool-call and reasoning formats "
                 "are inferred from it)")
      ->check(CLI::ExistingFile);
  bool quiet = false;
  app.add_flag("--no-log-requests", quiet, "Do not log a line per finished request");
  CLI11_PARSE(app, argc, argv);
  sc.log_requests = !quiet;
  mo.model_dir = mo.dir();
  if (!kv_memory.empty()) ec.kv_cache_bytes = parse_size(kv_memory);
  ec.max_model_len = mo.max_model_len;
  ec.enforce_eager = mo.enforce_eager;
  if (sc.served_model_name.empty()) {
    auto dir = std::filesystem::path(mo.model_dir).lexically_normal();
    sc.served_model_name =
        dir.has_filename() ? dir.filename().string() : dir.parent_path().filename().string();
  }
  sc.http_threads = ec.scheduler.max_num_seqs + sc.max_queue + 32;

  // Signals are taken by this thread alone (sigwait below), not by the server's threads.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  server::ModelInfo info;
  resolve_parsers(mo.model_dir, chat_template, tool_parser, reasoning_parser, info);

  server::Server srv(sc);
  int port = srv.start();
  std::fprintf(stderr, "listening on http://%s:%d (model loading)\n", sc.host.c_str(), port);

  auto t0 = Clock::now();
  LoadedRuntime rt = load_with_progress(mo);
  std::fprintf(stderr, "%s\n", rt.load_summary().c_str());
  if (kv_memory.empty() && rt.backend->device() == Device::CUDA) ec.kv_cache_bytes = 0;  // profiled
  ec.kv_cache_dtype = rt.kv_cache_dtype;
  auto engine = std::make_unique<Engine>(*rt.loaded.model, *rt.backend, ec);
  info.vocab_size = rt.loaded.model->vocab_size();
  info.max_model_len = engine->max_model_len();
  info.kv_capacity_tokens = int64_t(engine->blocks().num_blocks()) * engine->blocks().block_size();
  info.max_num_seqs = ec.scheduler.max_num_seqs;
  info.eos_ids = rt.eos_ids;
  info.defaults = default_sampling(rt.loaded.config);
  std::string kv_cache = engine->kv_cache_summary();
  std::unique_ptr<server::TextCodec> codec =
      rt.tokenizer ? server::make_model_codec(
                         *rt.tokenizer, mo.model_dir,
                         [&rt](const std::string& text) { return rt.encode_prompt(text); }, chat_template)
                   : nullptr;
  if (!codec) std::fprintf(stderr, "no tokenizer.json: prompts must be token ids\n");
  if (codec && !(info.tool_format.empty() && info.reasoning_format.empty()))
    std::fprintf(stderr, "chat output parsing: tool calls '%s', reasoning '%s'\n",
                 info.tool_format.empty() ? "none" : info.tool_format.c_str(),
                 info.reasoning_format.empty() ? "none" : info.reasoning_format.c_str());
  AsyncEngine async(std::move(engine));
  srv.set_model(async, codec.get(), info);
  std::fprintf(stderr, "loaded %s (%s) in %.2f s: context %d, KV cache %s; serving '%s'\n",
               mo.model_dir.c_str(), rt.loaded.architecture.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count(), info.max_model_len,
               kv_cache.c_str(), sc.served_model_name.c_str());

  int sig = 0;
  sigwait(&sigs, &sig);
  std::fprintf(stderr, "shutting down\n");
  srv.stop();
  async.stop();
  return 0;
}

const Register reg{"serve", "Serve a model over an OpenAI-compatible HTTP API", run};

}  // namespace
}  // namespace tessera::app

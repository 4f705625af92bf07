// tessera chat: a conversation in the terminal through the model's chat template, each reply
// streamed as it is made.
//   tessera chat [-m DIR] [--system TEXT] [-n MAX_TOKENS] [--ignore-eos] [sampling flags]
// Reads one message per line from standard input (a line ending in '\' goes on to the next);
// "/reset" forgets the conversation, "/exit" or the end of input ends it. Replies go to stdout,
// one a line; each reply's counts go to stderr. Earlier turns come from the prefix cache, so a
// turn computes only what it adds. Ctrl-C (SIGINT) during a reply stops it there, keeping what
// it said; at the prompt it ends the chat.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "command.h"
#include "engine/engine.h"
#include "model_options.h"

namespace tessera::app {
namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t interrupted = 0;

// SIGINT sets `interrupted`. Without SA_RESTART, a read waiting at the prompt fails with EINTR,
// which ends the input.
void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { interrupted = 1; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

// The next message: a line, joined to the following ones while it ends in '\'. False at the end
// of input.
bool read_message(std::string& out) {
  out.clear();
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.back() != '\\') return out += line, true;
    line.pop_back();
    out += line + "\n";
  }
  return !out.empty();
}

int run(int argc, char** argv) {
  CLI::App app{"Chat with a model in the terminal", "tessera chat"};
  ModelOptions mo;
  add_model_options(app, mo);
  SamplingFlags sf;
  add_sampling_flags(app, sf);
  std::string system, template_file;
  int max_tokens = 1024;
  bool ignore_eos = false;
  size_t kv_mib = 1024;
  app.add_option("--system", system, "A system message to open the conversation with");
  app.add_option("-n,--max-tokens", max_tokens, "Most tokens in one reply")->check(CLI::PositiveNumber);
  app.add_flag("--ignore-eos", ignore_eos, "Keep each reply going past end-of-turn tokens, to -n");
  app.add_option("--chat-template", template_file, "Use this template file instead of the model's")
      ->check(CLI::ExistingFile);
  app.add_option("--kv-cache-mib", kv_mib, "KV cache memory in MiB: the conversation's longest length")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  LoadedRuntime rt = load_runtime(mo);
  const Tokenizer& tok = rt.require_tokenizer();
  ChatTemplate tmpl = ChatTemplate::from_model_dir(mo.dir(), template_file);
  EngineConfig ec;
  ec.kv_cache_bytes = kv_mib << 20;
  ec.max_model_len = mo.max_model_len;
  ec.enforce_eager = mo.enforce_eager;
  ec.kv_cache_dtype = rt.kv_cache_dtype;
  Engine engine(*rt.loaded.model, *rt.backend, ec);
  const int64_t context = std::min<int64_t>(
      engine.max_model_len(), int64_t(engine.blocks().num_blocks()) * engine.blocks().block_size());
  const SamplingParams params = sampling_params(sf, rt.loaded.config);

  nlohmann::ordered_json start = nlohmann::ordered_json::array();
  if (!system.empty()) start.push_back({{"role", "system"}, {"content", system}});
  nlohmann::ordered_json messages = start;
  const bool terminal = ::isatty(STDIN_FILENO);
  catch_interrupts();
  std::string message;
  for (int turn = 0;; ++turn) {
    if (terminal) std::fputs("> ", stdout), std::fflush(stdout);
    interrupted = 0;
    if (!read_message(message) || message == "/exit") {
      if (interrupted && terminal) std::fputs("\n", stdout);  // the shell's prompt on a line of its own
      break;
    }
    if (message == "/reset") {
      messages = start;
      continue;
    }
    if (message.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", message}});
    std::vector<int32_t> ids;
    try {
      ids = rt.encode_text(tmpl.render({{"messages", messages}, {"add_generation_prompt", true}}), false);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      messages.erase(messages.end() - 1);
      continue;
    }
    if (int64_t(ids.size()) >= context) {
      std::fprintf(stderr,
                   "error: the conversation is %zu tokens, the context %lld; /reset starts a new one\n",
                   ids.size(), (long long)context);
      messages.erase(messages.end() - 1);
      continue;
    }

    Request req;
    req.prompt = ids;
    req.max_tokens = int(std::min<int64_t>(max_tokens, context - int64_t(ids.size())));
    req.params = params;
    if (sf.seed) req.seed = *sf.seed + uint64_t(turn);
    if (!ignore_eos) req.stop_token_ids = rt.eos_ids;
    const int64_t id = engine.add_request(req);
    StreamDecoder text(tok, /*skip_special=*/true);
    std::string reply;
    int generated = 0;
    const Clock::time_point t0 = Clock::now();
    Clock::time_point first;
    while (engine.has_work()) {
      if (interrupted) {
        engine.abort(id);
        while (engine.has_work()) engine.step();  // a step launched ahead
        break;
      }
      for (TokenOutput& o : engine.step()) {
        TESSERA_CHECK(o.error.empty(), o.error);
        if (o.token < 0) continue;
        if (generated++ == 0) first = Clock::now();
        if (o.finished && o.finish_reason == FinishReason::Stop) continue;  // the end of turn is not text
        std::string piece = text.push(o.token);
        reply += piece;
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
      }
    }
    std::string rest = text.flush();
    reply += rest;
    std::printf("%s\n", rest.c_str());
    std::fflush(stdout);
    if (interrupted) std::fputs("[interrupted]\n", stderr);
    if (generated == 0) first = Clock::now();
    const Sequence* seq = engine.sequence(id);
    const double decode_s = std::chrono::duration<double>(Clock::now() - first).count();
    std::fprintf(stderr,
                 "[prompt %zu tokens (%d cached), reply %d tokens, %.2f s to the first, %.1f tok/s]\n",
                 ids.size(), seq ? seq->num_cached_tokens : 0, generated,
                 std::chrono::duration<double>(first - t0).count(),
                 generated > 1 && decode_s > 0 ? (generated - 1) / decode_s : 0.0);
    engine.release(id);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

const Register reg{"chat", "Chat with a model in the terminal, through its chat template", run};

}  // namespace
}  // namespace tessera::app

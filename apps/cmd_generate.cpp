// tessera generate: load a model directory and generate from a prompt, streaming to stdout.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/engine.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/vocab.h"
#include "model_options.h"
#include "token_ids.h"

namespace tessera::app {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int run(int argc, char** argv) {
  CLI::App app{"Generate text from a prompt", "tessera generate"};
  ModelOptions mo;
  add_model_options(app, mo);
  std::string prompt, prompt_ids;
  int max_tokens = 128;
  bool output_ids = false, json = false, ignore_eos = false;
  int logprobs = -1;
  SamplingFlags sf;
  app.add_option("-p,--prompt", prompt, "Prompt text");
  app.add_option("--prompt-ids", prompt_ids, "Prompt as space-separated token ids");
  app.add_option("-n,--max-tokens", max_tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  add_sampling_flags(app, sf);
  app.add_flag("--output-ids", output_ids, "Print generated token ids (space-separated) instead of text");
  app.add_option("--logprobs", logprobs, "With --json: the N most likely tokens at each step")->check(CLI::NonNegativeNumber);
  app.add_flag("--json", json, "One JSON object per generated token: {\"id\", \"logprob\", \"top\"}");
  app.add_flag("--ignore-eos", ignore_eos, "Keep generating past end-of-sequence tokens");
  // Structured output, under llama.cpp's names: the text is held to a grammar.
  std::string grammar, grammar_file, json_schema, json_schema_file;
  auto* g1 = app.add_option("--grammar", grammar, "Hold the output to a GBNF grammar (llama.cpp's notation)");
  auto* g2 = app.add_option("--grammar-file", grammar_file, "The same, from a file")->check(CLI::ExistingFile);
  auto* g3 = app.add_option("-j,--json-schema", json_schema, "Hold the output to a JSON Schema ('{}': any JSON)");
  auto* g4 = app.add_option("--json-schema-file", json_schema_file, "The same, from a file")->check(CLI::ExistingFile);
  for (auto* a : {g1, g2, g3, g4})
    for (auto* b : {g1, g2, g3, g4})
      if (a != b) a->excludes(b);
  CLI11_PARSE(app, argc, argv);

  auto t0 = Clock::now();
  LoadedRuntime rt = load_runtime(mo);
  double load_s = seconds_since(t0);

  std::vector<int32_t> ids;
  if (!prompt_ids.empty()) {
    TESSERA_CHECK(prompt.empty(), "give either --prompt or --prompt-ids, not both");
    ids = parse_token_ids(prompt_ids, "--prompt-ids");
  } else {
    TESSERA_CHECK(!prompt.empty(), "give a prompt: --prompt TEXT or --prompt-ids \"1 2 3\"");
    ids = rt.encode_prompt(prompt);
  }

  Request req;
  req.prompt = ids;
  req.max_tokens = max_tokens;
  req.params = sampling_params(sf, rt.loaded.config);
  req.seed = sf.seed;
  if (json) req.params.logprobs = std::max(logprobs, 0);
  if (!ignore_eos) req.stop_token_ids = rt.eos_ids;
  if (!grammar_file.empty()) grammar = read_text_file(grammar_file);
  if (!json_schema_file.empty()) json_schema = read_text_file(json_schema_file);
  if (!grammar.empty() || !json_schema.empty()) {
    auto schema = nlohmann::ordered_json::parse(json_schema.empty() ? "null" : json_schema, nullptr, false);
    TESSERA_CHECK(json_schema.empty() || !schema.is_discarded(), "--json-schema: not valid JSON");
    auto c = std::make_shared<grammar::Constraint>();
    c->grammar = grammar.empty() ? grammar::json_schema_grammar(schema) : grammar::gbnf_grammar(grammar);
    c->vocab = std::make_shared<const grammar::Vocab>(rt.require_tokenizer().all_token_bytes());
    req.params.constraint = std::move(c);
  }

  EngineConfig ec;
  ec.block_size = 16;
  ec.num_blocks = int((ids.size() + size_t(max_tokens) + 15) / 16) + 1;
  ec.max_model_len = mo.max_model_len;
  ec.enforce_eager = mo.enforce_eager;
  ec.kv_cache_dtype = rt.kv_cache_dtype;
  ec.scheduler.max_num_batched_tokens = std::max<int>(int(ids.size()), 512);
  Engine engine(*rt.loaded.model, *rt.backend, ec);
  int64_t id = engine.add_request(req);

  // Text output streams through the incremental detokenizer (never half a UTF-8 character).
  std::optional<StreamDecoder> text;
  if (!json && !output_ids) text.emplace(rt.require_tokenizer(), /*skip_special=*/true);
  auto t_start = Clock::now();
  double prefill_s = 0;
  int generated = 0;
  bool first = true;
  while (engine.has_work()) {
    for (auto& o : engine.step()) {
      if (o.seq_id != id) continue;
      TESSERA_CHECK(o.error.empty(), o.error);
      if (o.token < 0) continue;  // a grammar complete with no stop token to end on
      if (first) prefill_s = seconds_since(t_start), first = false;
      ++generated;
      bool is_stop = o.finish_reason == FinishReason::Stop;
      if (json) {
        nlohmann::json j = {{"id", o.token}, {"logprob", o.sample.logprob}, {"top", nlohmann::json::array()}};
        for (auto& [tid, lp] : o.sample.top) j["top"].push_back({tid, lp});
        std::printf("%s\n", j.dump().c_str());
      } else if (output_ids) {
        std::printf("%s%d", generated > 1 ? " " : "", o.token);
      } else if (!is_stop) {
        std::fputs(text->push(o.token).c_str(), stdout);
      }
      std::fflush(stdout);
    }
  }
  if (text) std::fputs(text->flush().c_str(), stdout);
  if (output_ids || !json) std::printf("\n");
  std::fflush(stdout);
  double total_s = seconds_since(t_start);
  double decode_s = total_s - prefill_s;
  std::fprintf(stderr,
               "prompt tokens: %zu, generated tokens: %d, load: %.2f s, prefill: %.1f tok/s, decode: %.1f tok/s\n",
               ids.size(), generated, load_s, prefill_s > 0 ? double(ids.size()) / prefill_s : 0.0,
               generated > 1 && decode_s > 0 ? (generated - 1) / decode_s : 0.0);
  return 0;
}

const Register reg{"generate", "Generate text from a prompt with a model directory", run};

}  // namespace
}  // namespace tessera::app

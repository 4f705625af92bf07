// Batched generation through the whole engine on the GPU, as llama.cpp's batched-bench measures
// it: N sequences of P random prompt tokens each generate G tokens (EOS ignored); the model is a
// real checkpoint directory (bench_load writes an 8B-shaped one). Unlike bench_cuda, every step
// pays what a user pays: the scheduler, the runner's metadata uploads, reading the logits back
// and sampling on the host. Prints prefill and decode throughput per batch size.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "backend/cuda_loader.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "runner/model_runner.h"
#include "models/model.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  int batch = 0;
  std::string sampling;
  double prefill_tok_s = 0, decode_tok_s = 0, step_ms = 0;
  // Over the decode steps in which every one of the N sequences decodes: N in lockstep, as
  // llama.cpp's batched-bench times its generation (its prompts all prefilled first). The other
  // decode steps are the tail of the sequences that started later (the prompts go in chunks).
  double lockstep_tok_s = 0;
  // Per decode step, ms: the runner's input building + uploads, its launches, the wait for the
  // results; scheduling; sampling; the rest of the step.
  double prepare_ms = 0, enqueue_ms = 0, readback_ms = 0, schedule_ms = 0, sample_ms = 0, other_ms = 0;
  double median_ms = 0, max_ms = 0;  // of the decode steps
  double replayed = 0;               // fraction of the decode steps that replayed a CUDA graph
  double ahead = 0;                  // fraction launched before the step before them was back
};

// first: other parameters for the first sequence (one client among many asking for logprobs).
Row run_batch(Engine& engine, int vocab, int batch, int prompt_len, int gen, const SamplingParams& params,
              const std::string& label, const SamplingParams* first = nullptr) {
  static uint32_t runs = 0;  // new prompts every run: no prefix-cache hits between runs
  std::mt19937 rng{++runs};
  std::vector<int64_t> ids;
  for (int s = 0; s < batch; ++s) {
    Request r;
    for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(int32_t(rng() % uint32_t(vocab)));
    r.params = s == 0 && first ? *first : params;
    r.max_tokens = gen;
    r.seed = uint64_t(s);
    ids.push_back(engine.add_request(std::move(r)));
  }
  // Prefill: until every sequence has its first token (the prompts go in chunks of the step's
  // token budget, beside the decodes of the sequences already started); decode: the rest.
  auto all_started = [&] {
    return std::all_of(ids.begin(), ids.end(), [&](int64_t id) { return engine.sequence(id)->num_generated() > 0; });
  };
  auto t0 = Clock::now();
  int decode_tokens = 0, decode_steps = 0, lockstep_tokens = 0;
  double lockstep_s = 0;
  while (!all_started()) engine.step();
  auto t1 = Clock::now();
  const Engine::StepTimes before = engine.step_times();
  std::vector<double> step_s;
  while (engine.has_work()) {
    auto ts = Clock::now();
    const int n = int(engine.step().size());
    step_s.push_back(std::chrono::duration<double>(Clock::now() - ts).count());
    decode_tokens += n;
    ++decode_steps;
    if (n == batch) lockstep_tokens += n, lockstep_s += step_s.back();
  }
  auto t2 = Clock::now();
  const Engine::StepTimes after = engine.step_times();
  for (int64_t id : ids) engine.release(id);
  double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  double decode_s = std::chrono::duration<double>(t2 - t1).count();
  const double per = decode_steps ? 1e3 / decode_steps : 0.0;
  Row r;
  r.batch = batch, r.sampling = label;
  r.prefill_tok_s = double(batch) * prompt_len / prefill_s, r.decode_tok_s = decode_tokens / decode_s;
  r.lockstep_tok_s = lockstep_s > 0 ? lockstep_tokens / lockstep_s : 0.0;
  r.step_ms = decode_s * per;
  r.prepare_ms = (after.run.prepare - before.run.prepare) * per;
  r.enqueue_ms = (after.run.enqueue - before.run.enqueue) * per;
  r.readback_ms = (after.run.readback - before.run.readback) * per;
  r.schedule_ms = (after.schedule - before.schedule) * per;
  r.sample_ms = (after.sample - before.sample) * per;
  r.replayed = decode_steps ? double(after.run.replayed - before.run.replayed) / decode_steps : 0.0;
  r.ahead = decode_steps ? double(after.run.ahead - before.run.ahead) / decode_steps : 0.0;
  r.other_ms = r.step_ms - r.prepare_ms - r.enqueue_ms - r.readback_ms - r.schedule_ms - r.sample_ms;
  if (!step_s.empty()) {
    std::sort(step_s.begin(), step_s.end());
    r.median_ms = step_s[step_s.size() / 2] * 1e3, r.max_ms = step_s.back() * 1e3;
  }
  return r;
}

// Scoring a text (perplexity, prompt logprobs): the log-probability of each token given the ones
// before it, in tokens per second. Engine::score computes them where the logits are; the host's
// way, measured beside it, reads every row's logits back and log-softmaxes them on the host.
double score_tok_s(Engine& engine, const std::vector<int32_t>& text) {
  auto t0 = Clock::now();
  std::vector<double> lp = engine.score(text);
  return double(lp.size()) / std::chrono::duration<double>(Clock::now() - t0).count();
}
// Prompts scored as requests (prompt_logprobs with the top 1, one token made): what an
// lm-evaluation-harness loglikelihood run sends through echo, all at once.
double request_score_tok_s(Engine& engine, int vocab, int prompts, int prompt_len) {
  std::mt19937 rng{99};
  std::vector<int64_t> ids;
  auto t0 = Clock::now();
  for (int s = 0; s < prompts; ++s) {
    Request r;
    for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(int32_t(rng() % uint32_t(vocab)));
    r.params.temperature = 0;
    r.max_tokens = 1;
    r.prompt_logprobs = 1;
    ids.push_back(engine.add_request(std::move(r)));
  }
  int64_t scores = 0;
  while (engine.has_work())
    for (const TokenOutput& o : engine.step()) scores += int64_t(o.prompt_scores.size());
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int64_t id : ids) engine.release(id);
  return double(scores) / s;
}

double host_score_tok_s(Model& model, Backend& be, const std::vector<int32_t>& text) {
  const int bs = 16, blocks = int(text.size() + bs - 1) / bs;
  KvCache cache = allocate_kv_cache(be, model.kv_spec(), blocks, bs);
  BlockManager bm(blocks, bs);
  Sequence s;
  s.tokens = text;
  s.num_prompt_tokens = int(text.size());
  bm.ensure_capacity(s, int(text.size()));
  ModelRunner runner(model, be, cache);
  auto t0 = Clock::now();
  StepLogits l = runner.run({{&s, int(text.size()) - 1}}, /*all_rows=*/true);
  std::vector<double> lp;
  for (size_t r = 0; r < l.position.size(); ++r)
    lp.push_back(log_softmax(l.logits.data() + r * size_t(l.vocab), l.vocab)[size_t(text[size_t(l.position[r]) + 1])]);
  return double(lp.size()) / std::chrono::duration<double>(Clock::now() - t0).count();
}

int run(int argc, char** argv) {
  CLI::App app{"Batched generation through the engine on the GPU"};
  std::string model_dir = "/tmp/tessera-bench-load-8b";
  std::vector<int> batches = {1, 8, 32, 64, 128, 256};
  int prompt_len = 512, gen = 128;
  app.add_option("--model", model_dir, "checkpoint directory (bench_load writes an 8B-shaped one)");
  app.add_option("--batches", batches, "numbers of sequences")->delimiter(',');
  app.add_option("--prompt", prompt_len, "prompt tokens per sequence");
  app.add_option("--gen", gen, "generated tokens per sequence");
  CLI11_PARSE(app, argc, argv);

  std::string error;
  auto be = load_cuda_backend(0, &error);
  if (!be) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  LoadedModel lm = load_model(model_dir, *be);
  EngineConfig cfg;
  cfg.kv_cache_dtype = DType::BF16;
  cfg.kv_cache_bytes = size_t(40) << 30;
  cfg.scheduler.max_num_seqs = *std::max_element(batches.begin(), batches.end());
  cfg.scheduler.max_num_batched_tokens = 8192;
  Engine engine(*lm.model, *be, cfg);
  std::printf("%s on %s; %s; prompts of %d tokens, %d generated, EOS ignored\n", model_dir.c_str(),
              be->name().c_str(), engine.kv_cache_summary().c_str(), prompt_len, gen);

  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams nucleus;
  nucleus.temperature = 0.8f;
  nucleus.top_p = 0.95f;
  SamplingParams penalised = nucleus;
  penalised.repetition_penalty = 1.1f;
  penalised.frequency_penalty = 0.3f;
  const int vocab = lm.model->vocab_size();
  run_batch(engine, vocab, 1, 32, 8, greedy, "warm-up");
  std::vector<Row> rows;
  for (int b : batches) rows.push_back(run_batch(engine, vocab, b, prompt_len, gen, greedy, "greedy"));
  for (int b : {1, 64})
    if (std::count(batches.begin(), batches.end(), b))
      rows.push_back(run_batch(engine, vocab, b, prompt_len, gen, nucleus, "T 0.8, top_p 0.95"));
  for (int b : {1, 64})
    if (std::count(batches.begin(), batches.end(), b))
      rows.push_back(run_batch(engine, vocab, b, prompt_len, gen, penalised, "+ rep 1.1, freq 0.3"));
  SamplingParams logprobs = greedy;
  logprobs.logprobs = 5;
  SamplingParams nucleus_logprobs = nucleus;
  nucleus_logprobs.logprobs = 5;
  if (std::count(batches.begin(), batches.end(), 64)) {
    rows.push_back(run_batch(engine, vocab, 64, prompt_len, gen, greedy, "greedy, 1 logprobs", &logprobs));
    rows.push_back(run_batch(engine, vocab, 64, prompt_len, gen, logprobs, "greedy, 64 logprobs"));
    rows.push_back(run_batch(engine, vocab, 64, prompt_len, gen, nucleus_logprobs, "nucleus, 64 logprobs"));
    SamplingParams penalised_logprobs = penalised;
    penalised_logprobs.logprobs = 5;
    rows.push_back(run_batch(engine, vocab, 64, prompt_len, gen, penalised_logprobs, "+ rep, 64 logprobs"));
    // More than the backend lists (kMaxBackendLogprobs): every row's logits come back to the host.
    SamplingParams many = logprobs;
    many.logprobs = kMaxBackendLogprobs + 1;
    rows.push_back(run_batch(engine, vocab, 64, prompt_len, gen, many, "greedy, 64 x 21 (host)"));
  }
  {
    // The same steps with every op launched on its own: what the CUDA graphs save.
    EngineConfig eager_cfg = cfg;
    eager_cfg.enforce_eager = true;
    eager_cfg.kv_cache_bytes = size_t(8) << 30;
    eager_cfg.scheduler.max_num_seqs = 64;
    Engine eager(*lm.model, *be, eager_cfg);
    for (int b : {1, 64})
      if (std::count(batches.begin(), batches.end(), b))
        rows.push_back(run_batch(eager, vocab, b, prompt_len, gen, greedy, "greedy, eager"));
  }
  {
    // Each step launched only once the one before it is back: what launching ahead saves.
    EngineConfig serial_cfg = cfg;
    serial_cfg.overlap_steps = false;
    serial_cfg.kv_cache_bytes = size_t(8) << 30;
    serial_cfg.scheduler.max_num_seqs = 64;
    Engine serial(*lm.model, *be, serial_cfg);
    for (int b : {1, 32, 64})
      if (std::count(batches.begin(), batches.end(), b))
        rows.push_back(run_batch(serial, vocab, b, prompt_len, gen, greedy, "greedy, one by one"));
  }

  std::mt19937 text_rng{7};
  std::vector<int32_t> text(2048);
  for (int32_t& t : text) t = int32_t(text_rng() % uint32_t(vocab));
  const double scored = score_tok_s(engine, text);
  const double host_scored = host_score_tok_s(*lm.model, *be, text);
  const double requests_scored = request_score_tok_s(engine, vocab, 64, prompt_len);

  std::printf("\n%-6s %-20s %14s %14s %14s %12s\n", "batch", "sampling", "prefill tok/s", "decode tok/s",
              "all N at once", "ms / step");
  for (const Row& r : rows)
    std::printf("%-6d %-20s %14.0f %14.1f %14.1f %12.2f\n", r.batch, r.sampling.c_str(), r.prefill_tok_s,
                r.decode_tok_s, r.lockstep_tok_s, r.step_ms);
  std::printf("(decode tok/s: every decode step; all N at once: the steps in which all N sequences decode, as "
              "llama.cpp's batched-bench times them)\n");
  std::printf("\nwhere a decode step's time goes, ms: inputs built and uploaded, forward launched, waiting "
              "for the results, scheduling, sampling, the rest; steps that replayed a graph, and that were launched "
              "ahead\n");
  std::printf("%-6s %-20s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "batch", "sampling", "prepare", "launch",
              "wait", "schedule", "sample", "rest", "median", "slowest", "replayed", "ahead");
  for (const Row& r : rows)
    std::printf("%-6d %-20s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.0f%% %8.0f%%\n", r.batch,
                r.sampling.c_str(), r.prepare_ms, r.enqueue_ms, r.readback_ms, r.schedule_ms, r.sample_ms, r.other_ms,
                r.median_ms, r.max_ms, 100 * r.replayed, 100 * r.ahead);
  std::printf("\nscoring %zu tokens (perplexity): %.0f tok/s with logprobs where the logits are; %.0f tok/s "
              "reading the logits back to the host\n",
              text.size(), scored, host_scored);
  std::printf("scoring 64 prompts of %d tokens as requests (prompt_logprobs 1, all at once): %.0f tok/s\n", prompt_len,
              requests_scored);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  try {
    return tessera::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_engine: %s\n", e.what());
    return 1;
  }
}

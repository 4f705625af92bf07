// The engine loop: requests in, one step at a time, tokens out. One step reads
//   batch = scheduler.schedule(); logits = runner.run(batch); postprocess(batch, logits)
// The same loop serves `tessera generate` (one request) and the server (many).
// Not thread-safe: one thread owns the engine; the server hands requests over a queue.
#pragma once
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/kv_budget.h"
#include "engine/scheduler.h"
#include "runner/model_runner.h"

namespace tessera {

struct EngineConfig {
  int block_size = 16;
  int num_blocks = 0;               // 0: derive from kv_cache_bytes
  size_t kv_cache_bytes = size_t(1) << 30;  // 0: what gpu_memory_utilization leaves (profiled, kv_budget.h)
  float gpu_memory_utilization = 0.9f;
  DType kv_cache_dtype = DType::F32;
  int max_model_len = 0;            // 0: the model's max_position_embeddings
  bool enforce_eager = false;       // never replay recorded decode steps (runner/model_runner.h)
  // Launch each decode step before the tokens of the one before it are back (Engine::step);
  // unset: where the backend computes asynchronously (a GPU).
  std::optional<bool> overlap_steps;
  SchedulerConfig scheduler;
};

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
  int max_tokens = 16;
  int min_tokens = 0;                   // no stop token is drawn before this many (vLLM's min_tokens)
  std::vector<int32_t> stop_token_ids;  // EOS ids and any the caller adds
  std::optional<uint64_t> seed;         // none: a random seed
  int prompt_logprobs = -1;             // see Sequence::prompt_logprobs
};

struct TokenOutput {
  int64_t seq_id;
  int32_t token;  // -1: none (a constrained sequence whose grammar left it no token: finished, Stop)
  SampleResult sample;
  bool finished;
  FinishReason finish_reason;
  // With the sequence's first token, where it asked for them: Sequence::prompt_scores.
  std::vector<SampleResult> prompt_scores = {};
  // Non-empty: the sequence failed on its own input (its grammar) and is finished (Abort, token -1).
  std::string error = {};
};

class Engine {
 public:
  Engine(Model& model, Backend& be, const EngineConfig& cfg);

  // Validates and queues a request; throws tessera::Error on one that can never run
  // (empty prompt, a token id outside the vocabulary, prompt + max_tokens beyond the context).
  int64_t add_request(Request req);
  // One scheduling step; returns the tokens produced in it. In a run of decode steps of the same
  // sequences, it leaves the next step launched, computing on the backend while the caller
  // handles these tokens.
  std::vector<TokenOutput> step();
  // Finishes a sequence now (client gone); its blocks are freed immediately.
  void abort(int64_t seq_id);
  // Forgets a finished sequence (aborting it first when it still runs).
  void release(int64_t seq_id);

  // Log-probability of each token of `tokens` given the ones before it (tokens.size() - 1
  // values): scoring for perplexity and prompt logprobs. Runs between steps (not while one is
  // launched ahead), in chunks of the step token budget, and leaves the prefix cache warm.
  std::vector<double> score(const std::vector<int32_t>& tokens);

  bool has_work() const { return !scheduler_.empty() || launched_.has_value(); }
  const Sequence* sequence(int64_t seq_id) const;
  const BlockManager& blocks() const { return blocks_; }
  const Scheduler& scheduler() const { return scheduler_; }
  int max_model_len() const { return max_model_len_; }
  const KvCacheSpec& kv_spec() const { return kv_spec_; }
  // Where the steps' time went so far: the runner's phases, plus scheduling and sampling.
  struct StepTimes {
    RunTimes run;
    double schedule = 0, sample = 0;  // seconds, summed; sample includes registering full blocks
    int64_t steps = 0;
  };
  StepTimes step_times() const {
    StepTimes t = times_;
    t.run = runner_.times();
    return t;
  }
  // Tokens, GiB and dtype of the KV cache, and how its size was chosen when it was profiled.
  std::string kv_cache_summary() const;

 private:
  void finish(Sequence& s, FinishReason reason);
  void warm_up();
  bool can_launch_next(const std::vector<ScheduledSeq>& batch, const Draws& draws);

  Model& model_;
  EngineConfig cfg_;
  int max_model_len_;
  KvCacheSpec kv_spec_;
  std::optional<ProfiledBudget> profiled_;  // set when the cache size was profiled
  KvCache cache_;
  BlockManager blocks_;
  Scheduler scheduler_;
  ModelRunner runner_;
  const bool draw_on_backend_;  // a GPU: sampling happens where the logits are when it can
  const bool overlap_;          // EngineConfig::overlap_steps
  std::optional<std::vector<ScheduledSeq>> launched_;  // a step launched, not yet drawn
  std::vector<std::unique_ptr<Sequence>> retired_;     // released while launched_ held them
  StepTimes times_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  int64_t next_id_ = 1;
};

}  // namespace tessera

#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>

#include "core/error.h"
#include "core/threadpool.h"
#include "engine/constrained.h"
#include "grammar/vocab.h"

namespace tessera {

namespace {

KvCacheSpec spec_for(const Model& model, DType dtype) {
  KvCacheSpec s = model.kv_spec();
  s.dtype = dtype;
  return s;
}

// The configured block count, else what the byte budget buys, else what the profiled budget
// buys (then recorded in `profiled`).
int kv_blocks(Model& model, Backend& be, const EngineConfig& cfg, const KvCacheSpec& spec,
              std::optional<ProfiledBudget>& profiled) {
  if (cfg.num_blocks > 0) return cfg.num_blocks;
  size_t bytes = cfg.kv_cache_bytes;
  if (bytes == 0)
    bytes = profiled.emplace(profile_kv_budget(model, be, spec, cfg.block_size, cfg.scheduler, cfg.gpu_memory_utilization))
                .kv_bytes;
  int n = num_kv_blocks(spec, bytes, cfg.block_size);
  TESSERA_CHECK(n > 0, "the KV cache memory (" + std::to_string(bytes) + " bytes) holds no block of " +
                           std::to_string(cfg.block_size) + " tokens (" +
                           std::to_string(spec.bytes_per_token() * size_t(cfg.block_size)) + " bytes)");
  return n;
}

}  // namespace

Engine::Engine(Model& model, Backend& be, const EngineConfig& cfg)
    : model_(model),
      cfg_(cfg),
      max_model_len_(cfg.max_model_len > 0 ? cfg.max_model_len : model.max_context()),
      kv_spec_(spec_for(model, cfg.kv_cache_dtype)),
      cache_(allocate_kv_cache(be, kv_spec_, kv_blocks(model, be, cfg, kv_spec_, profiled_), cfg.block_size)),
      blocks_(cache_.num_blocks, cfg.block_size),
      scheduler_(cfg.scheduler, blocks_),
      runner_(model, be, cache_, /*replay=*/!cfg.enforce_eager),
      draw_on_backend_(be.device() != Device::CPU),
      overlap_(cfg.overlap_steps.value_or(be.device() != Device::CPU)) {
  if (be.device() != Device::CPU) warm_up();
}

// One decode-shaped step for each power-of-two batch size up to the largest the scheduler may run
// (and that size): a GPU backend sets up each size class of its products on first use (it times
// cuBLASLt's candidate algorithms), which would otherwise stall the first step of each new batch
// size by up to a quarter of a second (measured on an H200 with an 8B model at batch 256).
void Engine::warm_up() {
  constexpr int kLargestTuned = 512;  // the products' timed size classes end here (cuda/gemm.h)
  const int most = std::min({cfg_.scheduler.max_num_seqs, cfg_.scheduler.max_num_batched_tokens, kLargestTuned,
                             blocks_.num_free_blocks()});
  if (most < 1) return;
  std::vector<Sequence> seqs(static_cast<size_t>(most));
  for (Sequence& s : seqs) {
    s.tokens = {0};
    s.num_prompt_tokens = 1;
    blocks_.ensure_capacity(s, 1);
  }
  for (int n = 1;; n = std::min(2 * n, most)) {
    std::vector<ScheduledSeq> batch;
    for (int i = 0; i < n; ++i) batch.push_back({&seqs[size_t(i)], 1});
    Draws greedy;
    greedy.rows.resize(static_cast<size_t>(n));
    runner_.run(batch, /*all_rows=*/false, &greedy);
    if (n == most) break;
  }
  for (Sequence& s : seqs) blocks_.release(s);
}

std::string Engine::kv_cache_summary() const {
  std::string s = describe_kv_capacity(kv_spec_, cache_.num_blocks, cache_.block_size);
  if (profiled_) {
    char why[160];
    std::snprintf(why, sizeof why, "; %.2f of %.2f GiB less %.2f GiB in use after a %d-token step",
                  double(profiled_->utilization), double(profiled_->total) / (1 << 30),
                  double(profiled_->in_use) / (1 << 30), profiled_->step_tokens);
    s += why;
  }
  return s;
}

int64_t Engine::add_request(Request req) {
  int n = int(req.prompt.size());
  TESSERA_CHECK(n > 0, "the prompt is empty");
  for (int32_t t : req.prompt)
    TESSERA_CHECK(t >= 0 && t < model_.vocab_size(),
                  "token id " + std::to_string(t) + " is outside the vocabulary (size " +
                      std::to_string(model_.vocab_size()) + ")");
  TESSERA_CHECK(req.max_tokens >= 1, "max_tokens must be at least 1");
  int64_t total = int64_t(n) + req.max_tokens;
  TESSERA_CHECK(total <= max_model_len_, "prompt (" + std::to_string(n) + " tokens) + max_tokens (" +
                                             std::to_string(req.max_tokens) + ") exceeds the context length " +
                                             std::to_string(max_model_len_));
  TESSERA_CHECK(total <= int64_t(blocks_.num_blocks()) * blocks_.block_size(),
                "prompt + max_tokens (" + std::to_string(total) + " tokens) exceeds the KV cache capacity (" +
                    std::to_string(int64_t(blocks_.num_blocks()) * blocks_.block_size()) + " tokens)");
  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->tokens = std::move(req.prompt);
  s->num_prompt_tokens = n;
  s->params = req.params;
  TESSERA_CHECK(req.prompt_logprobs >= -1 && req.prompt_logprobs <= model_.vocab_size(),
                "prompt_logprobs must be -1 (none) or 0 to the vocabulary size");
  s->prompt_logprobs = req.prompt_logprobs;
  if (s->prompt_logprobs >= 0) s->prompt_scores.resize(size_t(n - 1));
  s->max_tokens = req.max_tokens;
  s->stop_token_ids = std::move(req.stop_token_ids);
  TESSERA_CHECK(req.min_tokens >= 0 && req.min_tokens <= req.max_tokens,
                "min_tokens must be 0 to max_tokens");
  if (req.min_tokens > 0 && !s->stop_token_ids.empty()) {
    s->min_tokens = req.min_tokens;
    s->min_tokens_params = s->params;
    for (int32_t t : s->stop_token_ids)
      s->min_tokens_params.logit_bias.emplace_back(t, -std::numeric_limits<float>::infinity());
  }
  s->rng.seed(req.seed ? *req.seed : std::random_device{}());
  start_constrained(*s);
  Sequence* raw = s.get();
  seqs_[raw->id] = std::move(s);
  scheduler_.add(raw);
  return raw->id;
}

std::vector<TokenOutput> Engine::step() {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  std::vector<TokenOutput> out;
  if (!launched_) {
    auto t0 = Clock::now();
    std::vector<ScheduledSeq> batch = scheduler_.schedule();
    times_.schedule += seconds_since(t0);
    if (batch.empty()) return out;
    // The forward runs (on a GPU) while the host prepares the draws.
    runner_.launch(batch);
    launched_ = std::move(batch);
  }
  ++times_.steps;
  const std::vector<ScheduledSeq> batch = std::move(*launched_);
  launched_.reset();
  // Each row is drawn where it is cheapest: by the backend when it can (greedy anywhere; on a
  // GPU any sampling, with up to 20 logprobs), so only its id and logprobs come back; else on the
  // host from its logits. The draws are in the runner's row order: one per sequence whose
  // pending tokens all get computed this step (and one per sequence of a step launched ahead,
  // finished since or not).
  auto t = Clock::now();
  Draws draws;
  std::vector<Sequence*> sampled;
  for (const ScheduledSeq& b : batch) {
    Sequence& s = *b.seq;
    if (s.status != SeqStatus::Finished && s.num_computed_tokens + b.num_new_tokens != s.num_tokens()) continue;
    const bool on_backend =
        !constrained_now(s) &&
        (is_plain_argmax(s.draw_params()) || (draw_on_backend_ && is_backend_drawable(s.draw_params())));
    if (!on_backend) draws.host_rows.push_back(int32_t(sampled.size()));
    draws.rows.push_back(on_backend ? backend_draw(s.draw_params(), s.rng) : RowSampling{});
    draws.logprobs.push_back(on_backend ? s.draw_params().logprobs : -1);
    sampled.push_back(&s);
  }
  // Penalties and logit bias of the backend's rows become edits of their logits, one row per
  // thread (each sorts its sequence's tokens).
  auto on_host = [&](size_t r) {
    return std::binary_search(draws.host_rows.begin(), draws.host_rows.end(), int32_t(r));
  };
  std::vector<std::vector<LogitEdit>> edits(sampled.size());
  bool any = false;
  for (size_t r = 0; r < sampled.size(); ++r)
    any = any || (!on_host(r) && has_penalties(sampled[r]->draw_params()));
  if (any)
    ThreadPool::global().parallel_for(int64_t(sampled.size()), 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const Sequence& s = *sampled[size_t(r)];
        if (!on_host(size_t(r)))
          append_logit_edits(s.draw_params(), s.tokens, s.num_prompt_tokens, model_.vocab_size(), int32_t(r),
                             edits[size_t(r)]);
      }
    });
  for (const auto& e : edits) draws.edits.insert(draws.edits.end(), e.begin(), e.end());
  times_.sample += seconds_since(t);
  runner_.draw(&draws);
  // While the backend still computes this step, the next one goes in behind it where it is
  // sure to be the same batch, so that the host's work between steps (this step's results, the
  // caller's, the next launch) no longer leaves the GPU idle.
  if (can_launch_next(batch, draws)) {
    runner_.launch_next(batch);
    launched_ = batch;
  }
  StepLogits logits = runner_.collect();
  auto t1 = Clock::now();
  // The prompt's scores, by position (a recomputed prompt writes the same values again).
  for (size_t r = 0; r < logits.score_position.size(); ++r) {
    Sequence& s = *batch[size_t(logits.score_seq_index[r])].seq;
    const size_t p = size_t(logits.score_position[r]);
    TESSERA_CHECK(p < s.prompt_scores.size(), "engine: a prompt score past the prompt");
    s.prompt_scores[p] = {logits.score_token[r], logits.score_logprob[r], std::move(logits.score_top[r])};
  }

  // A sequence that finished after this step was launched ahead (a stop token in the step
  // before it, or an abort) drops its row.
  for (auto& b : batch) {
    if (b.seq->status == SeqStatus::Finished) continue;
    b.seq->num_computed_tokens += b.num_new_tokens;
    blocks_.register_full_blocks(*b.seq);
  }
  // The host's rows sample independently (each sequence has its own rng), so they share the
  // process's pool: with a 128k vocabulary one row of nucleus sampling costs milliseconds.
  const size_t rows = logits.seq_index.size();
  std::vector<SampleResult> results(rows);
  std::vector<uint8_t> no_token(rows, 0);  // a constrained row with nothing left to draw
  std::vector<std::string> failed(rows);   // a constrained row whose grammar could not be followed
  for (size_t r = 0; r < rows; ++r) {
    results[r].token = logits.ids[r];
    if (draws.logprobs[r] >= 0) {  // set for the backend's rows only
      results[r].logprob = logits.token_logprob[r];
      results[r].top = std::move(logits.top_logprobs[r]);
    }
  }
  ThreadPool::global().parallel_for(int64_t(draws.host_rows.size()), 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const size_t r = size_t(draws.host_rows[size_t(h)]);
      Sequence& s = *sampled[r];
      if (s.status == SeqStatus::Finished) continue;
      const float* row = logits.logits.data() + size_t(h) * size_t(logits.vocab);
      if (!constrained_now(s)) {
        results[r] = sample(row, logits.vocab, s.draw_params(), s.tokens, s.num_prompt_tokens, s.rng);
      } else {
        try {  // a grammar too ambiguous to follow fails its own sequence, not the step
          if (auto res = sample_constrained(row, logits.vocab, s)) results[r] = std::move(*res);
          else no_token[r] = 1;
        } catch (const Error& e) {
          failed[r] = e.what();
        }
      }
    }
  });
  times_.sample += seconds_since(t1);
  for (size_t r = 0; r < rows; ++r) {
    Sequence& s = *batch[logits.seq_index[r]].seq;
    if (s.status == SeqStatus::Finished) continue;
    SampleResult& res = results[r];
    if (no_token[r]) {  // its grammar is complete and it has no stop token: done, with no token (-1)
      finish(s, FinishReason::Stop);
      out.push_back({s.id, -1, {}, true, FinishReason::Stop});
      continue;
    }
    if (!failed[r].empty()) {
      finish(s, FinishReason::Abort);
      out.push_back({s.id, -1, {}, true, FinishReason::Abort, {}, std::move(failed[r])});
      continue;
    }
    s.tokens.push_back(res.token);
    FinishReason reason = FinishReason::None;
    if (std::count(s.stop_token_ids.begin(), s.stop_token_ids.end(), res.token)) reason = FinishReason::Stop;
    else if (s.num_generated() >= s.max_tokens) reason = FinishReason::Length;
    if (s.matcher && reason != FinishReason::Stop) {
      try {
        advance_constrained(s, res.token);
      } catch (const Error& e) {
        s.tokens.pop_back();
        finish(s, FinishReason::Abort);
        out.push_back({s.id, -1, {}, true, FinishReason::Abort, {}, e.what()});
        continue;
      }
    }
    if (reason != FinishReason::None) finish(s, reason);
    out.push_back({s.id, res.token, std::move(res), reason != FinishReason::None, reason});
    if (s.prompt_logprobs >= 0 && s.num_generated() == 1) out.back().prompt_scores = std::move(s.prompt_scores);
  }
  retired_.clear();  // a step launched ahead holds only running sequences
  return out;
}

// Whether the step after `batch` (drawn, its tokens not back yet) is known now: every running
// sequence, each computing the one token this step draws for it, drawn on the backend with
// nothing that depends on that token's value (penalties), none finishing by length here, and no
// waiting request that the scheduler could seat (a server at max_num_seqs still overlaps). A
// stop token is not known yet: such a sequence's row of the next step is dropped.
bool Engine::can_launch_next(const std::vector<ScheduledSeq>& batch, const Draws& draws) {
  const bool could_admit = scheduler_.num_waiting() > 0 && scheduler_.num_running() < cfg_.scheduler.max_num_seqs;
  if (!overlap_ || could_admit || int(batch.size()) != scheduler_.num_running() || !draws.host_rows.empty() ||
      draws.rows.size() != batch.size())
    return false;
  for (const ScheduledSeq& b : batch) {
    const Sequence& s = *b.seq;
    if (s.status != SeqStatus::Running || b.num_new_tokens != 1 ||
        s.num_computed_tokens + 1 != s.num_tokens() || has_penalties(s.draw_params()) ||
        s.num_generated() + 1 >= s.max_tokens)
      return false;
  }
  for (const ScheduledSeq& b : batch)  // what the scheduler's next step would take
    if (!blocks_.ensure_capacity(*b.seq, b.seq->num_computed_tokens + 2)) return false;
  return true;
}

std::vector<double> Engine::score(const std::vector<int32_t>& tokens) {
  TESSERA_CHECK(!launched_, "score() runs between steps, not while a decode step is launched ahead (step() until "
                            "has_work() is false)");
  TESSERA_CHECK(tokens.size() >= 2, "scoring needs at least two tokens");
  TESSERA_CHECK(int64_t(tokens.size()) <= max_model_len_, "text to score exceeds the context length");
  Sequence s;
  s.tokens = tokens;
  s.num_prompt_tokens = int(tokens.size());
  std::vector<double> out;
  int n = int(tokens.size());
  while (s.num_computed_tokens < n - 1) {
    int chunk = std::min(n - 1 - s.num_computed_tokens, cfg_.scheduler.max_num_batched_tokens);
    TESSERA_CHECK(blocks_.ensure_capacity(s, s.num_computed_tokens + chunk), "KV cache too small to score this text");
    for (float lp : runner_.score({{&s, chunk}})) out.push_back(lp);
    s.num_computed_tokens += chunk;
    blocks_.register_full_blocks(s);
  }
  blocks_.release(s);
  return out;
}

void Engine::finish(Sequence& s, FinishReason reason) {
  s.status = SeqStatus::Finished;
  s.finish_reason = reason;
  scheduler_.remove(&s);
}

void Engine::abort(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || it->second->status == SeqStatus::Finished) return;
  finish(*it->second, FinishReason::Abort);
}

void Engine::release(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  if (it->second->status != SeqStatus::Finished) finish(*it->second, FinishReason::Abort);
  // A step launched ahead still reads it; kept until that step is done.
  if (launched_) retired_.push_back(std::move(it->second));
  seqs_.erase(it);
}

const Sequence* Engine::sequence(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

}  // namespace tessera

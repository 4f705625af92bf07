// Logprobs computed where the logits are (Backend::logprobs through the runner) must be what the
// host computes from the downloaded logits: the host sampler's for a drawn token and its top-n
// list, log_softmax's for a scored text. On the CPU reference backend both sum the normaliser in
// double in id order, so they agree to the bit; the CUDA model tests hold a GPU to the same.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "model_testutil.h"
#include "runner/model_runner.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

namespace {

struct Step {
  Step(Model& model, Backend& be, int blocks, int bs)
      : cache(allocate_kv_cache(be, model.kv_spec(), blocks, bs)), blocks(blocks, bs) {}
  KvCache cache;
  BlockManager blocks;
  std::vector<Sequence> seqs;
  std::vector<ScheduledSeq> batch;
};

// n prompts prefilled in one step, each finishing its pending tokens.
std::unique_ptr<Step> prefill_step(Model& model, Backend& be, size_t n = 3) {
  const int V = model.vocab_size(), bs = 16;
  auto s = std::make_unique<Step>(model, be, 12, bs);
  s->seqs.resize(n);
  for (size_t i = 0; i < s->seqs.size(); ++i) {
    Sequence& q = s->seqs[i];
    for (int t = 0; t < 9 + 7 * int(i); ++t) q.tokens.push_back(int32_t((t * 31 + int(i) * 5 + 2) % V));
    q.num_prompt_tokens = int(q.tokens.size());
    EXPECT_TRUE(s->blocks.ensure_capacity(q, q.num_prompt_tokens));
    s->batch.push_back({&q, q.num_prompt_tokens});
  }
  return s;
}

TEST(RunnerLogprobs, BackendRowsEqualTheHostSampler) {
  TestModel m = load_test_model(fixtures_dir() / "models" / "llama", /*reference_backend=*/true);
  const int V = m.model().vocab_size();

  // Greedy with 5 logprobs, nucleus sampling with 3, greedy with the whole vocabulary, and
  // penalised greedy with 4 (edited for the draw, its logprobs of the model's own row).
  std::vector<SamplingParams> params(4);
  params[0].temperature = 0, params[0].logprobs = 5;
  params[1].temperature = 0.8f, params[1].top_p = 0.9f, params[1].logprobs = 3;
  params[2].temperature = 0, params[2].logprobs = V;
  params[3].temperature = 0, params[3].logprobs = 4, params[3].repetition_penalty = 3.0f;
  params[3].frequency_penalty = 0.5f, params[3].logit_bias = {{5, 100.0f}};
  auto plain = prefill_step(m.model(), *m.backend, params.size());
  ModelRunner runner(m.model(), *m.backend, plain->cache);  // holds the logits' memory
  StepLogits want = runner.run(plain->batch);
  ASSERT_EQ(want.logits.size(), params.size() * size_t(V));

  Draws draws;
  std::vector<Rng> rngs;
  for (size_t r = 0; r < params.size(); ++r) {
    rngs.emplace_back(100 + r);
    Rng rng = rngs.back();
    draws.rows.push_back(backend_draw(params[r], rng));
    draws.logprobs.push_back(params[r].logprobs);
    const Sequence& s = plain->seqs[r];
    append_logit_edits(params[r], s.tokens, s.num_prompt_tokens, V, int32_t(r), draws.edits);
  }
  ASSERT_FALSE(draws.edits.empty());
  auto drawn = prefill_step(m.model(), *m.backend, params.size());
  StepLogits got = ModelRunner(m.model(), *m.backend, drawn->cache).run(drawn->batch, false, &draws);
  EXPECT_TRUE(got.logits.empty()) << "no row should bring its logits back";
  ASSERT_EQ(got.token_logprob.size(), params.size());
  bool penalty_changed_the_token = false;
  for (size_t r = 0; r < params.size(); ++r) {
    const Sequence& s = plain->seqs[r];
    const float* row = want.logits.data() + r * size_t(V);
    SampleResult host = sample(row, V, params[r], s.tokens, s.num_prompt_tokens, rngs[r]);
    EXPECT_EQ(got.ids[r], host.token) << "row " << r;
    EXPECT_EQ(got.token_logprob[r], host.logprob) << "row " << r;
    EXPECT_EQ(got.top_logprobs[r], host.top) << "row " << r;
    EXPECT_EQ(got.top_logprobs[r].size(), size_t(std::min(params[r].logprobs, V)));
    if (has_penalties(params[r])) penalty_changed_the_token = host.token != int32_t(std::max_element(row, row + V) - row);
  }
  EXPECT_TRUE(penalty_changed_the_token) << "the penalised row should draw another token than its argmax";
}

TEST(RunnerLogprobs, ScoresEqualTheHostsLogSoftmax) {
  TestModel m = load_test_model(fixtures_dir() / "models" / "llama", /*reference_backend=*/true);
  const int V = m.model().vocab_size();
  auto plain = prefill_step(m.model(), *m.backend);
  // Scoring needs the token after each row: the texts are their prompts minus the last token.
  for (ScheduledSeq& b : plain->batch) b.num_new_tokens -= 1;
  ModelRunner runner(m.model(), *m.backend, plain->cache);  // holds the logits' memory
  StepLogits logits = runner.run(plain->batch, /*all_rows=*/true);
  auto scored = prefill_step(m.model(), *m.backend);
  for (ScheduledSeq& b : scored->batch) b.num_new_tokens -= 1;
  std::vector<float> got = ModelRunner(m.model(), *m.backend, scored->cache).score(scored->batch);
  ASSERT_EQ(got.size(), logits.seq_index.size());
  ASSERT_EQ(got.size(), size_t(8 + 15 + 22));
  for (size_t r = 0; r < got.size(); ++r) {
    const Sequence& s = plain->seqs[size_t(logits.seq_index[r])];
    std::vector<float> lp = log_softmax(logits.logits.data() + r * size_t(V), V);
    EXPECT_EQ(got[r], lp[size_t(s.tokens[size_t(logits.position[r]) + 1])]) << "row " << r;
  }
}

// The top n of a log-softmax row: larger first, the lower id on ties (Backend::logprobs).
std::vector<std::pair<int32_t, float>> top_of(const std::vector<float>& lp, int n) {
  std::vector<int32_t> ids(lp.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return lp[size_t(a)] > lp[size_t(b)]; });
  std::vector<std::pair<int32_t, float>> out;
  for (int k = 0; k < n; ++k) out.emplace_back(ids[size_t(k)], lp[size_t(ids[size_t(k)])]);
  return out;
}

// Sequences that ask for their prompt's logprobs get, beside their sampling rows (unchanged), a
// score after every prompt token but the last, also when the prompt comes in two chunks.
TEST(RunnerLogprobs, PromptScoresEqualTheHostsLogSoftmax) {
  TestModel m = load_test_model(fixtures_dir() / "models" / "llama", /*reference_backend=*/true);
  const int V = m.model().vocab_size();
  auto plain = prefill_step(m.model(), *m.backend);
  for (ScheduledSeq& b : plain->batch) b.num_new_tokens -= 1;  // every row but the last has a next token
  ModelRunner runner(m.model(), *m.backend, plain->cache);  // holds the logits' memory
  StepLogits all = runner.run(plain->batch, /*all_rows=*/true);
  auto host_row = [&](size_t seq, int position) {
    for (size_t r = 0; r < all.seq_index.size(); ++r)
      if (size_t(all.seq_index[r]) == seq && all.position[r] == position)
        return log_softmax(all.logits.data() + r * size_t(V), V);
    ADD_FAILURE() << "no row for sequence " << seq << " at " << position;
    return std::vector<float>(size_t(V));
  };

  // Sequence 0 asks for the top 3, sequence 1 for none, sequence 2 for only its tokens' (0);
  // sequence 2's prompt (23 tokens) comes in chunks of 10 and 13.
  const int want_top[3] = {3, -1, 0};
  auto scored = prefill_step(m.model(), *m.backend);
  for (size_t i = 0; i < 3; ++i) scored->seqs[i].prompt_logprobs = want_top[i];
  ModelRunner scorer(m.model(), *m.backend, scored->cache);
  std::vector<ScheduledSeq> first = scored->batch, second = {scored->batch[2]};
  first[2].num_new_tokens = 10;
  second[0].num_new_tokens = 13;
  Draws greedy;
  greedy.rows.resize(2);  // sequences 0 and 1 finish their prompts in the first step
  StepLogits a = scorer.run(first, false, &greedy);
  scored->seqs[2].num_computed_tokens = 10;
  greedy.rows.resize(1);
  StepLogits b = scorer.run(second, false, &greedy);

  // The sampling rows draw what they draw without scores.
  auto unscored = prefill_step(m.model(), *m.backend);
  std::vector<ScheduledSeq> same = unscored->batch;
  same[2].num_new_tokens = 10;
  greedy.rows.resize(2);
  StepLogits u = ModelRunner(m.model(), *m.backend, unscored->cache).run(same, false, &greedy);
  ASSERT_EQ(a.seq_index, (std::vector<int>{0, 1}));
  EXPECT_EQ(a.ids, u.ids);
  EXPECT_TRUE(u.score_position.empty());
  // Scores of step a: sequence 0's 8 positions, then sequence 2's first 10; of step b: its 12 more.
  std::vector<std::pair<size_t, int>> expected;
  for (int p = 0; p < 8; ++p) expected.emplace_back(0, p);
  for (int p = 0; p < 10; ++p) expected.emplace_back(2, p);
  ASSERT_EQ(a.score_position.size(), expected.size());
  ASSERT_EQ(b.score_position.size(), size_t(12));
  for (int p = 10; p < 22; ++p) expected.emplace_back(2, p);
  for (size_t k = 0; k < expected.size(); ++k) {
    const StepLogits& s = k < a.score_position.size() ? a : b;
    const size_t r = k < a.score_position.size() ? k : k - a.score_position.size();
    const size_t seq = k < a.score_position.size() ? size_t(s.score_seq_index[r]) : 2;
    if (&s == &a) {
      ASSERT_EQ(size_t(s.score_seq_index[r]), expected[k].first) << "score " << k;
    }
    ASSERT_EQ(s.score_position[r], expected[k].second) << "score " << k;
    const int p = expected[k].second;
    const int32_t next = scored->seqs[seq].tokens[size_t(p) + 1];
    const std::vector<float> lp = host_row(seq, p);
    EXPECT_EQ(s.score_token[r], next) << "score " << k;
    EXPECT_EQ(s.score_logprob[r], lp[size_t(next)]) << "score " << k;
    EXPECT_EQ(s.score_top[r], top_of(lp, want_top[seq])) << "score " << k;
  }
}

// Through the engine: the prompt's scores come with the first token, as scoring the prompt gives
// them, and a request asking for them computes its whole prompt though the prefix cache holds it.
TEST(EnginePromptLogprobs, ComeWithTheFirstTokenAndSkipThePrefixCache) {
  TestModel m = load_test_model(fixtures_dir() / "models" / "llama", /*reference_backend=*/true);
  const int V = m.model().vocab_size();
  EngineConfig ec;
  ec.num_blocks = 32;
  Engine engine(m.model(), *m.backend, ec);
  std::vector<int32_t> prompt;
  for (int t = 0; t < 40; ++t) prompt.push_back(int32_t((t * 37 + 11) % V));
  auto run = [&](int prompt_logprobs) {
    Request r;
    r.prompt = prompt;
    r.params.temperature = 0;
    r.max_tokens = 2;
    r.prompt_logprobs = prompt_logprobs;
    const int64_t id = engine.add_request(std::move(r));
    std::vector<TokenOutput> outs;
    while (engine.has_work())
      for (TokenOutput& o : engine.step()) outs.push_back(std::move(o));
    const int cached = engine.sequence(id)->num_cached_tokens;
    engine.release(id);
    return std::pair{outs, cached};
  };
  auto [plain, plain_cached] = run(-1);
  EXPECT_EQ(plain_cached, 0);
  ASSERT_EQ(plain.size(), size_t(2));
  EXPECT_TRUE(plain[0].prompt_scores.empty());

  auto [scored, scored_cached] = run(4);
  EXPECT_EQ(scored_cached, 0) << "a request scoring its prompt must compute all of it";
  ASSERT_EQ(scored.size(), size_t(2));
  EXPECT_EQ(scored[0].token, plain[0].token);
  EXPECT_TRUE(scored[1].prompt_scores.empty()) << "the scores come once, with the first token";
  const std::vector<double> want = engine.score(prompt);
  const std::vector<SampleResult>& got = scored[0].prompt_scores;
  ASSERT_EQ(got.size(), prompt.size() - 1);
  for (size_t p = 0; p < got.size(); ++p) {
    EXPECT_EQ(got[p].token, prompt[p + 1]) << "position " << p;
    EXPECT_EQ(got[p].logprob, float(want[p])) << "position " << p;
    ASSERT_EQ(got[p].top.size(), size_t(4));
    EXPECT_GE(got[p].top[0].second, got[p].logprob);
  }
  EXPECT_EQ(run(-1).second, 32) << "the prompt's full blocks stay cached for the others";
}

}  // namespace

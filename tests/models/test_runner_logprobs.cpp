// Logprobs computed where the logits are (Backend::logprobs through the runner) must be what the
// host computes from the downloaded logits: the host sampler's for a drawn token and its top-n
// list, log_softmax's for a scored text. On the CPU reference backend both sum the normaliser in
// double in id order, so they agree to the bit; the CUDA model tests hold a GPU to the same.
#include <gtest/gtest.h>

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

}  // namespace

// One forward path, many ways to feed it: all must give the same logits within f32 rounding.
#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

namespace {

// Logprob differences between two f32 schedules of the same computation: GEMMs of different
// batch sizes sum in different orders, so equality is to rounding, far below any real bug's effect.
constexpr double kTol = 2e-5;

std::vector<std::vector<int32_t>> prompts() {
  return {{1, 17, 200, 45, 99, 7, 8},
          {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 65, 69, 73, 77, 81, 85, 89, 93, 97, 101,
           105, 109, 113, 117, 121, 125, 129, 133, 137},
          {1, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318}};
}

class Consistency : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { m = load_test_model(fixtures_dir() / "models" / GetParam()); }
  std::vector<Generation> run(const std::vector<std::vector<int32_t>>& ps, int budget, int num_blocks = 64) {
    EngineConfig ec;
    ec.num_blocks = num_blocks;
    ec.scheduler.max_num_batched_tokens = budget;
    Engine e(m.model(), *m.backend, ec);
    auto out = generate_greedy(e, m.model().vocab_size(), ps, 12);
    preemptions = e.scheduler().num_preemptions();
    return out;
  }
  int64_t preemptions = 0;
  void expect_same(const Generation& a, const Generation& b) {
    ASSERT_EQ(a.tokens, b.tokens);
    for (size_t s = 0; s < a.logprobs.size(); ++s) EXPECT_LT(max_abs_diff(a.logprobs[s], b.logprobs[s]), kTol);
  }
  TestModel m;
};

TEST_P(Consistency, IncrementalDecodeEqualsFullRecompute) {
  auto gen = run({prompts()[1]}, 512)[0];
  std::vector<int32_t> all = prompts()[1];
  all.insert(all.end(), gen.tokens.begin(), gen.tokens.end());
  auto logits = logits_all_rows(m, all);
  int V = m.model().vocab_size();
  for (size_t s = 0; s < gen.tokens.size(); ++s) {
    size_t row = prompts()[1].size() - 1 + s;
    auto lp = log_softmax(logits.data() + row * V, V);
    EXPECT_LT(max_abs_diff(gen.logprobs[s], lp), kTol) << "step " << s;
  }
}

TEST_P(Consistency, ChunkedPrefillEqualsWhole) {
  auto whole = run({prompts()[1]}, 512)[0];
  for (int budget : {1, 7, 16}) expect_same(run({prompts()[1]}, budget)[0], whole);
}

TEST_P(Consistency, PrefixCacheHitEqualsMiss) {
  EngineConfig ec;
  ec.num_blocks = 64;
  Engine e(m.model(), *m.backend, ec);
  int V = m.model().vocab_size();
  auto miss = generate_greedy(e, V, {prompts()[1]}, 12)[0];
  auto hit = generate_greedy(e, V, {prompts()[1]}, 12)[0];
  EXPECT_EQ(miss.cached_tokens, 0);
  EXPECT_EQ(hit.cached_tokens, 32);  // two full 16-token blocks of the 35-token prompt
  expect_same(hit, miss);
  // A longer prompt sharing the prefix reuses it too.
  auto longer = prompts()[1];
  longer.insert(longer.end(), {3, 4, 5});
  EXPECT_EQ(generate_greedy(e, V, {longer}, 4)[0].cached_tokens, 32);
}

TEST_P(Consistency, BatchEqualsEachAlone) {
  auto batched = run(prompts(), 512);
  for (size_t i = 0; i < prompts().size(); ++i) expect_same(batched[i], run({prompts()[i]}, 512)[0]);
}

// Rows drawn in different places in one step: plain greedy by the backend (argmax_rows), greedy
// with logprobs and seeded sampling on the host from their gathered logits. Each request must
// come out as it does alone.
TEST_P(Consistency, MixedDrawsEqualEachAlone) {
  std::vector<SamplingParams> params(3);
  params[0].temperature = 0;
  params[1].temperature = 0, params[1].logprobs = 5;
  params[2].temperature = 0.8f, params[2].top_p = 0.9f;
  auto generate = [&](const std::vector<size_t>& which) {
    EngineConfig ec;
    ec.num_blocks = 64;
    Engine e(m.model(), *m.backend, ec);
    std::vector<int64_t> ids;
    for (size_t i : which) {
      Request r;
      r.prompt = prompts()[i];
      r.params = params[i];
      r.max_tokens = 12;
      r.seed = 7 + i;
      ids.push_back(e.add_request(r));
    }
    std::vector<std::vector<int32_t>> tokens(which.size());
    std::vector<std::vector<float>> logprobs(which.size());
    while (e.has_work())
      for (const TokenOutput& o : e.step()) {
        size_t k = size_t(std::find(ids.begin(), ids.end(), o.seq_id) - ids.begin());
        tokens[k].push_back(o.token);
        for (auto [t, lp] : o.sample.top) logprobs[k].push_back(lp);
      }
    return std::pair{tokens, logprobs};
  };
  auto [batched, batched_lp] = generate({0, 1, 2});
  ASSERT_EQ(batched_lp[1].size(), 12u * 5);
  for (size_t i = 0; i < 3; ++i) {
    auto [alone, alone_lp] = generate({i});
    EXPECT_EQ(batched[i], alone[0]) << "request " << i;
    EXPECT_LT(max_abs_diff(batched_lp[i], alone_lp[0]), kTol) << "request " << i;
  }
}

TEST_P(Consistency, PreemptionUnderMemoryPressureGivesSameOutput) {
  // 6 blocks of 16 cannot hold the three sequences at once: some are preempted and recomputed.
  auto tight = run(prompts(), 512, 6);
  EXPECT_GT(preemptions, 0);
  for (size_t i = 0; i < prompts().size(); ++i) expect_same(tight[i], run({prompts()[i]}, 512)[0]);
}

INSTANTIATE_TEST_SUITE_P(Models, Consistency, ::testing::Values("llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3",
                                                                 "qwen3_moe", "mixtral"));

}  // namespace

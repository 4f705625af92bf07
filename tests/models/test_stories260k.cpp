// The real trained stories260K model (../shared/reference): greedy ids of llama2.c and logits of
// transformers.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

namespace {

std::filesystem::path model_dir() { return reference_dir() / "models" / "stories260K"; }

TEST(Stories260K, GreedyMatchesLlama2c) {
  TESSERA_REQUIRE_REFERENCE();
  auto ref = nlohmann::json::parse(read_file(model_dir() / "reference" / "llama2c_greedy.json"));
  TestModel m = load_test_model(model_dir());
  EngineConfig ec;
  ec.num_blocks = 32;
  Engine engine(m.model(), *m.backend, ec);
  auto expected = ref["ids"].get<std::vector<int32_t>>();
  auto gen = generate_greedy(engine, m.model().vocab_size(), {ref["prompt_ids"].get<std::vector<int32_t>>()},
                             int(expected.size()));
  EXPECT_EQ(gen[0].tokens, expected);
}

TEST(Stories260K, LogitsMatchTransformers) {
  TESSERA_REQUIRE_REFERENCE();
  auto ref = nlohmann::json::parse(read_file(model_dir() / "reference" / "transformers_logits.json"));
  auto ids = ref["input_ids"].get<std::vector<int32_t>>();
  for (bool reference_backend : {false, true}) {
    TestModel m = load_test_model(model_dir(), reference_backend);
    auto logits = logits_all_rows(m, ids);
    int V = m.model().vocab_size();
    double max_err = 0, max_err64 = 0;
    for (size_t t = 0; t < ids.size(); ++t)
      for (int v = 0; v < V; ++v) {
        double got = logits[t * V + v];
        max_err = std::max(max_err, std::fabs(got - ref["logits_f32_cpu"][t][v].get<double>()));
        max_err64 = std::max(max_err64, std::fabs(got - ref["logits_f64_cpu"][t][v].get<double>()));
      }
    std::printf("%s backend: max |logit - transformers f32| = %.3g, vs f64 = %.3g\n",
                reference_backend ? "reference" : "fast", max_err, max_err64);
    // Logits are O(10); f32 with a different summation order stays within a few ulp-scale 1e-5s.
    EXPECT_LT(max_err, 1e-4);
    EXPECT_LT(max_err64, 1e-4);
  }
}

// The prompt's logprobs through the engine (a request's prompt_logprobs) against the log-softmax
// of transformers' f64 logits: logits within 1e-4 (above) move a logprob by at most 2e-4.
TEST(Stories260K, PromptLogprobsMatchTransformers) {
  TESSERA_REQUIRE_REFERENCE();
  auto ref = nlohmann::json::parse(read_file(model_dir() / "reference" / "transformers_logits.json"));
  auto ids = ref["input_ids"].get<std::vector<int32_t>>();
  TestModel m = load_test_model(model_dir());
  const int V = m.model().vocab_size();
  EngineConfig ec;
  ec.num_blocks = 32;
  Engine engine(m.model(), *m.backend, ec);
  Request r;
  r.prompt = ids;
  r.max_tokens = 1;
  r.prompt_logprobs = 3;
  engine.add_request(std::move(r));
  std::vector<SampleResult> got;
  while (engine.has_work())
    for (TokenOutput& o : engine.step())
      if (!o.prompt_scores.empty()) got = std::move(o.prompt_scores);
  ASSERT_EQ(got.size(), ids.size() - 1);
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    std::vector<double> row(static_cast<size_t>(V));
    for (int v = 0; v < V; ++v) row[size_t(v)] = ref["logits_f64_cpu"][t][v].get<double>();
    const double mx = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (double x : row) sum += std::exp(x - mx);
    auto lp = [&](int32_t v) { return row[size_t(v)] - mx - std::log(sum); };
    EXPECT_EQ(got[t].token, ids[t + 1]);
    EXPECT_NEAR(got[t].logprob, lp(ids[t + 1]), 2e-4) << "position " << t;
    ASSERT_EQ(got[t].top.size(), size_t(3));
    for (auto [id, v] : got[t].top) EXPECT_NEAR(v, lp(id), 2e-4) << "position " << t << ", id " << id;
    EXPECT_NEAR(got[t].top[0].second, lp(int32_t(std::max_element(row.begin(), row.end()) - row.begin())), 2e-4);
  }
}

}  // namespace

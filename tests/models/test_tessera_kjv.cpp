// The bundled model (models/tessera-kjv) against transformers' greedy continuations and top-5
// logprobs recorded by scripts/train_small_model.py.
#include <nlohmann/json.hpp>

#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

TEST(TesseraKjv, GreedyAndTop5MatchTransformers) {
  auto ref = nlohmann::json::parse(read_file(fixtures_dir() / "tessera-kjv" / "reference_generations.json"));
  TestModel m = load_test_model(std::filesystem::path(TESSERA_SOURCE_DIR) / "models" / "tessera-kjv");
  EngineConfig ec;
  ec.num_blocks = 64;
  Engine engine(m.model(), *m.backend, ec);
  double worst = 0;
  for (auto& c : ref["cases"]) {
    auto expected = c["generated_ids"].get<std::vector<int32_t>>();
    auto gen = generate_greedy(engine, m.model().vocab_size(), {c["prompt_ids"].get<std::vector<int32_t>>()},
                               ref["max_new_tokens"].get<int>(), {ref["eos_token_id"].get<int32_t>()})[0];
    ASSERT_EQ(gen.tokens, expected) << c["name"];
    for (size_t s = 0; s < expected.size(); ++s)
      for (size_t k = 0; k < 5; ++k) {
        int id = c["top5_ids"][s][k];
        double want = c["top5_logprobs"][s][k];
        worst = std::max(worst, std::fabs(gen.logprobs[s][id] - want));
        ASSERT_NEAR(gen.logprobs[s][id], want, 1e-4) << c["name"] << " step " << s;
      }
  }
  std::printf("tessera-kjv: max |logprob - transformers| = %.3g\n", worst);
}

// Greedy continuations and top-5 logprobs of transformers on the same tiny random checkpoints
// (tests/fixtures/models, written by scripts/make_fixtures.py).
#include <nlohmann/json.hpp>

#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

namespace {

class HfGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGolden, GreedyIdsAndTop5Logprobs) {
  auto dir = fixtures_dir() / "models" / GetParam();
  auto ref = nlohmann::json::parse(read_file(dir / "reference.json"));
  TestModel m = load_test_model(dir);
  int vocab = m.model().vocab_size();
  EngineConfig ec;
  ec.num_blocks = 64;
  Engine engine(m.model(), *m.backend, ec);
  // longrope (phi3): transformers' generate recomputes a sequence's cache with the long factors
  // when it first outgrows original_max_position_embeddings; the engine keeps the keys it has (as
  // vLLM does), so a continuation that crosses that length is not compared.
  const auto cfg = nlohmann::json::parse(read_file(dir / "config.json"));
  const auto rope = cfg.value("rope_parameters", nlohmann::json::object());
  const bool longrope = rope.value("rope_type", "") == "longrope";
  const size_t crossing = cfg.value("original_max_position_embeddings", size_t(0));
  double worst = 0;
  int compared = 0;
  for (auto& c : ref["cases"]) {
    auto prompt = c["prompt"].get<std::vector<int32_t>>();
    auto expected = c["generated"].get<std::vector<int32_t>>();
    if (longrope && prompt.size() <= crossing && prompt.size() + expected.size() > crossing + 1) continue;
    ++compared;
    auto gen = generate_greedy(engine, vocab, {prompt}, int(expected.size()), m.loaded.config.eos_token_ids())[0];
    ASSERT_EQ(gen.tokens, expected) << "prompt of " << prompt.size() << " tokens";
    for (size_t step = 0; step < expected.size(); ++step) {
      for (auto& pair : c["top5"][step]) {
        int id = pair[0].get<int>();
        double want = pair[1].get<double>();
        worst = std::max(worst, std::fabs(gen.logprobs[step][id] - want));
        // f32 compute on both sides; only summation order differs.
        ASSERT_NEAR(gen.logprobs[step][id], want, 1e-4) << "step " << step << " token " << id;
      }
    }
  }
  EXPECT_GE(compared, 2);
  RecordProperty("max_logprob_error", std::to_string(worst));
  std::printf("%s: max |logprob - transformers| = %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Models, HfGolden,
                         ::testing::Values("llama", "llama_bf16", "llama_f16", "llama_dynamic", "mistral", "qwen2",
                                           "qwen3", "gemma2", "gemma3", "phi3", "qwen3_moe", "qwen3_moe_bf16",
                                           "mixtral"));

}  // namespace

// 16-bit KV caches against the f32 cache on the CPU: the same greedy tokens, and top-5 logprobs
// within what rounding K and V to 8 (bf16) or 11 (f16) significant bits moves them. Each element
// moves by up to 2^-9 (bf16) or 2^-12 (f16) of itself; through the 4 layers of the trained model
// that moved the top-5 logprobs by at most 0.051 (bf16) and 0.0043 (f16, 8x less, as the extra 3
// bits predict). The limits leave about 2x; a cache read from the wrong rows or heads moves them by
// whole units and changes the greedy tokens.
#include <nlohmann/json.hpp>
#include <numeric>

#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

namespace {

std::vector<Generation> generate(TestModel& m, DType kv, const std::vector<std::vector<int32_t>>& prompts,
                                 int max_tokens) {
  EngineConfig ec;
  ec.num_blocks = 64;
  ec.kv_cache_dtype = kv;
  Engine engine(m.model(), *m.backend, ec);
  EXPECT_EQ(engine.kv_spec().dtype, kv);
  return generate_greedy(engine, m.model().vocab_size(), prompts, max_tokens);
}

// Largest |logprob difference| over the top-5 tokens of the f32 run at each step.
double worst_top5_diff(const Generation& f32, const Generation& other) {
  double worst = 0;
  for (size_t s = 0; s < f32.logprobs.size(); ++s) {
    std::vector<int> ids(f32.logprobs[s].size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + 5, ids.end(),
                      [&](int a, int b) { return f32.logprobs[s][size_t(a)] > f32.logprobs[s][size_t(b)]; });
    for (int k = 0; k < 5; ++k)
      worst = std::max(worst, std::fabs(double(f32.logprobs[s][size_t(ids[size_t(k)])]) -
                                        other.logprobs[s][size_t(ids[size_t(k)])]));
  }
  return worst;
}

}  // namespace

TEST(KvCacheDtype, SixteenBitCachesMatchF32OnTesseraKjv) {
  auto ref = nlohmann::json::parse(read_file(fixtures_dir() / "tessera-kjv" / "reference_generations.json"));
  TestModel m = load_test_model(std::filesystem::path(TESSERA_SOURCE_DIR) / "models" / "tessera-kjv");
  std::vector<std::vector<int32_t>> prompts;
  for (auto& c : ref["cases"]) prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  const int n = ref["max_new_tokens"].get<int>();
  auto f32 = generate(m, DType::F32, prompts, n);
  for (auto [kv, limit] : {std::pair{DType::BF16, 0.1}, {DType::F16, 0.01}}) {
    auto got = generate(m, kv, prompts, n);
    double worst = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i].tokens, f32[i].tokens) << dtype_name(kv) << " prompt " << i;
      worst = std::max(worst, worst_top5_diff(f32[i], got[i]));
    }
    std::printf("tessera-kjv %s KV cache: max |top-5 logprob - f32 cache| = %.3g (limit %.3g)\n",
                std::string(dtype_name(kv)).c_str(), worst, limit);
    EXPECT_LT(worst, limit);
    EXPECT_GT(worst, 0) << "the cache was not rounded";
  }
}

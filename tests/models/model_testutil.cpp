#include "model_testutil.h"

#include <cmath>

namespace tessera::test {

TestModel load_test_model(const std::filesystem::path& dir, bool reference_backend) {
  TestModel m;
  m.backend = make_cpu_backend({.reference = reference_backend, .threads = 2});
  m.loaded = load_model(dir, *m.backend);
  return m;
}

std::vector<float> logits_all_rows(Model& model, Backend& be, const std::vector<int32_t>& tokens) {
  const int bs = 16;
  int blocks = int(tokens.size() + bs - 1) / bs;
  KvCache cache = allocate_kv_cache(be, model.kv_spec(), blocks, bs);
  BlockManager bm(blocks, bs);
  Sequence s;
  s.tokens = tokens;
  s.num_prompt_tokens = int(tokens.size());
  EXPECT_TRUE(bm.ensure_capacity(s, int(tokens.size())));
  ModelRunner runner(model, be, cache);
  std::span<const float> logits = runner.run({{&s, int(tokens.size())}}, /*all_rows=*/true).logits;
  return {logits.begin(), logits.end()};
}

std::vector<Generation> generate_greedy(Engine& engine, int vocab, const std::vector<std::vector<int32_t>>& prompts,
                                        int max_tokens, const std::vector<int32_t>& stop_ids) {
  std::vector<int64_t> ids;
  for (auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.max_tokens = max_tokens;
    r.params.temperature = 0;
    r.params.logprobs = vocab;
    r.stop_token_ids = stop_ids;
    ids.push_back(engine.add_request(r));
  }
  std::vector<Generation> out(prompts.size());
  while (engine.has_work()) {
    for (auto& o : engine.step()) {
      size_t i = std::find(ids.begin(), ids.end(), o.seq_id) - ids.begin();
      out[i].tokens.push_back(o.token);
      std::vector<float> lp(size_t(vocab), 0.0f);
      for (auto [t, v] : o.sample.top) lp[t] = v;
      out[i].logprobs.push_back(std::move(lp));
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    out[i].cached_tokens = engine.sequence(ids[i])->num_cached_tokens;
    engine.release(ids[i]);
  }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace tessera::test

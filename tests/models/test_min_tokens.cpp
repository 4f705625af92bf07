// vLLM's min_tokens through the engine: before that many tokens no stop token is drawn, whatever
// the logits, and the logprobs reported are still the model's own; steps launched ahead give
// the same tokens.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "model_testutil.h"
#include "testutil.h"

using namespace tessera;
using namespace tessera::test;

namespace {

std::vector<TokenOutput> generate(Engine& engine, Request r) {
  const int64_t id = engine.add_request(std::move(r));
  std::vector<TokenOutput> outs;
  while (engine.has_work())
    for (TokenOutput& o : engine.step()) outs.push_back(std::move(o));
  engine.release(id);
  return outs;
}

TEST(EngineMinTokens, NoStopTokenBeforeMinTokens) {
  TestModel m = load_test_model(fixtures_dir() / "models" / "llama", /*reference_backend=*/true);
  const int V = m.model().vocab_size();
  std::vector<int32_t> prompt;
  for (int t = 0; t < 12; ++t) prompt.push_back(int32_t((t * 41 + 7) % V));
  std::vector<int32_t> first_run;  // the tokens with steps one by one
  for (bool overlap : {false, true}) {
    EngineConfig ec;
    ec.num_blocks = 32;
    ec.overlap_steps = overlap;
    Engine engine(m.model(), *m.backend, ec);
    Request r;
    r.prompt = prompt;
    r.params.temperature = 0;
    r.params.logprobs = 2;
    r.max_tokens = 10;
    const std::vector<TokenOutput> greedy = generate(engine, r);
    ASSERT_EQ(greedy.size(), size_t(10));

    // The greedy's first and third tokens are stop tokens: without min_tokens the first ends it.
    r.stop_token_ids = {greedy[0].token, greedy[2].token};
    const std::vector<TokenOutput> stopped = generate(engine, r);
    ASSERT_EQ(stopped.size(), size_t(1));
    EXPECT_EQ(stopped[0].finish_reason, FinishReason::Stop);

    r.min_tokens = 5;
    const std::vector<TokenOutput> got = generate(engine, r);
    ASSERT_GE(got.size(), size_t(5)) << "overlap " << overlap;
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_TRUE(got[i].token != greedy[0].token && got[i].token != greedy[2].token) << "token " << i;
      EXPECT_FALSE(got[i].finished && got[i].finish_reason == FinishReason::Stop) << "token " << i;
    }
    // The first draw had the model's own row: its best token (the banned one) heads the top 2,
    // and the token drawn instead is the second.
    ASSERT_EQ(got[0].sample.top.size(), size_t(2));
    EXPECT_EQ(got[0].sample.top[0].first, greedy[0].token);
    EXPECT_EQ(got[0].sample.top[1].first, got[0].token);
    EXPECT_EQ(got[0].sample.logprob, got[0].sample.top[1].second);
    std::vector<int32_t> tokens;
    for (const TokenOutput& o : got) tokens.push_back(o.token);
    if (!overlap) first_run = tokens;
    else EXPECT_EQ(tokens, first_run) << "steps launched ahead";

    r.min_tokens = 11;  // more than max_tokens
    EXPECT_THROW(engine.add_request(r), Error);
  }
}

}  // namespace

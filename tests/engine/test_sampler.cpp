#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/sampler.h"

using namespace tessera;

namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f};

SampleResult draw(const SamplingParams& p, uint64_t seed, const std::vector<int32_t>& tokens = {}, int prompt = 0) {
  Rng rng(seed);
  return sample(kLogits.data(), int(kLogits.size()), p, tokens, prompt, rng);
}

std::map<int32_t, int> histogram(const SamplingParams& p, int n) {
  Rng rng(7);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) h[sample(kLogits.data(), int(kLogits.size()), p, {}, 0, rng).token]++;
  return h;
}

TEST(Sampler, GreedyPicksArgmax) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(draw(p, 1).token, 1);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.5f;
  Rng a(42), b(42);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(sample(kLogits.data(), 5, p, {}, 0, a).token, sample(kLogits.data(), 5, p, {}, 0, b).token);
}

TEST(Sampler, FollowsTheSoftmaxDistribution) {
  SamplingParams p;
  auto h = histogram(p, 40000);
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  for (int i = 0; i < 5; ++i) {
    double expected = std::exp(kLogits[i]) / z;
    EXPECT_NEAR(h[i] / 40000.0, expected, 0.01) << i;  // ~4 standard errors
  }
}

TEST(Sampler, TopKTopPMinPRestrictTheCandidates) {
  SamplingParams p;
  p.top_k = 2;
  auto h = histogram(p, 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(1) && h.count(4));

  p = SamplingParams{};
  p.top_p = 0.3f;  // the most likely token alone has ~0.37
  EXPECT_EQ(histogram(p, 500).size(), 1u);

  p = SamplingParams{};
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * p(max): logits 3.0, 2.9, 2.0 (e^-1 = 0.37 < 0.5 drops 2.0)
  auto hm = histogram(p, 2000);
  EXPECT_EQ(hm.size(), 2u);
}

TEST(Sampler, PenaltiesChangeTheChoiceButNotTheReportedLogprobs) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  auto plain = draw(p, 1);
  p.repetition_penalty = 2.0f;  // token 1 was seen: 3.0 -> 1.5; token 4 (2.9) wins
  auto penalised = draw(p, 1, {1}, 1);
  EXPECT_EQ(penalised.token, 4);
  EXPECT_EQ(penalised.top, plain.top);  // logprobs are of the model's own distribution

  p.repetition_penalty = 1.0f;
  p.presence_penalty = 0.2f;  // only generated tokens count (the prompt here is token 4)
  EXPECT_EQ(draw(p, 1, {4, 1}, 1).token, 4);
  EXPECT_EQ(draw(p, 1, {1, 4}, 1).token, 1);
  p.presence_penalty = 0;
  p.frequency_penalty = 0.06f;  // two occurrences: 3.0 - 0.12 < 2.9
  EXPECT_EQ(draw(p, 1, {1, 1}, 0).token, 4);
  p.frequency_penalty = 0;
  p.logit_bias = {{3, 10.0f}};
  EXPECT_EQ(draw(p, 1).token, 3);
}

TEST(Sampler, LogprobsAreNormalisedAndSorted) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 5;
  auto r = draw(p, 1);
  double total = 0;
  for (size_t i = 0; i < r.top.size(); ++i) {
    total += std::exp(r.top[i].second);
    if (i) {
      EXPECT_GE(r.top[i - 1].second, r.top[i].second);
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_EQ(r.top[0].first, 1);
  EXPECT_FLOAT_EQ(r.logprob, r.top[0].second);
}

}  // namespace

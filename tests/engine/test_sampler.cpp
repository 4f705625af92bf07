#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "engine/sampler.h"
#include "sampler_reference.h"

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

// --- sample() against the reference (the sampler before the fast path), bit for bit ---

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A logits row of one of several shapes: smooth, peaked, with many ties, with -inf entries,
// all equal, of huge magnitude (so nothing is ever negligible next to the maximum).
std::vector<float> random_row(int V, int shape, std::mt19937_64& g) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> token(0, V - 1);
  std::vector<float> row(static_cast<size_t>(V));
  float scale = std::uniform_real_distribution<float>(0.5f, 6.0f)(g);
  for (float& x : row) x = scale * normal(g);
  switch (shape) {
    case 0:  // smooth
      break;
    case 1:  // a few tokens far above the rest, as for a confident model
      for (int i = 0; i < 5; ++i) row[size_t(token(g))] += 15.0f + 10.0f * normal(g);
      break;
    case 2:  // coarse values: many exact ties, some at the top
      for (float& x : row) x = std::round(x * 2.0f) / 2.0f;
      break;
    case 3:  // banned tokens
      for (float& x : row)
        if (g() % 4 == 0) x = kNegInf;
      break;
    case 4:  // all equal
      std::fill(row.begin(), row.end(), scale);
      break;
    case 5:  // huge magnitude: the ulp of the maximum is bigger than the spread that matters
      for (float& x : row) x = 1e9f + 300.0f * x;
      break;
    case 6:  // zeros of both signs and values just either side of them
      for (float& x : row) x = (g() % 3 == 0) ? -0.0f : (g() % 2 ? 0.0f : x * 1e-30f);
      break;
    default:  // wide: values within 38 of the maximum and far below it
      for (float& x : row) x = (g() % 2) ? x * 2.0f : x * 2.0f - 37.0f - float(g() % 4);
      break;
  }
  return row;
}

SamplingParams random_params(int V, std::mt19937_64& g) {
  auto pick = [&](std::initializer_list<float> v) { return *(v.begin() + std::ptrdiff_t(g() % v.size())); };
  SamplingParams p;
  p.temperature = pick({0.0f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f, 3.0f});
  p.top_k = int(pick({0, 0, 1, 5, 50, 1000, float(V - 1), float(V), float(V + 5)}));
  p.top_p = pick({1.0f, 1.0f, 0.9f, 0.95f, 0.5f, 0.1f, 0.999999f, 0.99999994f});
  p.min_p = pick({0.0f, 0.0f, 0.05f, 0.5f});
  p.repetition_penalty = pick({1.0f, 1.0f, 1.3f, 0.8f});
  p.presence_penalty = pick({0.0f, 0.0f, 0.5f, -0.3f});
  p.frequency_penalty = pick({0.0f, 0.0f, 0.2f});
  for (int n = int(g() % 4); n > 0; --n)  // out-of-range ids and repeats included
    p.logit_bias.emplace_back(int32_t(g() % uint64_t(V + 2)) - 1, pick({5.0f, -100.0f, kNegInf, 0.25f}));
  p.logprobs = int(g() % 23) - 2;
  return p;
}

// Same token, logprob, top list (bits included) and the same random draws as the reference.
void expect_same_as_reference(const std::vector<float>& row, const SamplingParams& p,
                              const std::vector<int32_t>& tokens, int prompt, uint64_t seed,
                              const std::string& what) {
  Rng a(seed), b(seed);
  SampleResult want = reference::sample(row.data(), int(row.size()), p, tokens, prompt, a);
  SampleResult got = sample(row.data(), int(row.size()), p, tokens, prompt, b);
  ASSERT_EQ(got.token, want.token) << what;
  ASSERT_EQ(std::bit_cast<uint32_t>(got.logprob), std::bit_cast<uint32_t>(want.logprob)) << what;
  ASSERT_EQ(got.top.size(), want.top.size()) << what;
  for (size_t i = 0; i < want.top.size(); ++i) {
    ASSERT_EQ(got.top[i].first, want.top[i].first) << what << " top " << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(got.top[i].second), std::bit_cast<uint32_t>(want.top[i].second)) << what;
  }
  ASSERT_TRUE(a == b) << what << ": different random draws";
}

TEST(SamplerEquivalence, RandomRowsAndParams) {
  std::mt19937_64 g(2024);
  const int sizes[] = {1, 2, 5, 64, 1000, 5000, 40000, 128256, 150000};
  for (int iter = 0; iter < 600; ++iter) {
    int V = sizes[iter % 9];
    int shape = int(g() % 8);
    std::vector<float> row = random_row(V, shape, g);
    SamplingParams p = random_params(V, g);
    std::vector<int32_t> tokens(g() % 300);
    for (int32_t& t : tokens) t = int32_t(g() % uint64_t(V + 3)) - 1;  // a few out of range
    if (tokens.size() > 4)  // repeats, for the frequency penalty
      for (int i = 0; i < 20; ++i) tokens.push_back(tokens[g() % 4]);
    int prompt = int(g() % (tokens.size() + 3)) - 1;
    std::string what = "iter " + std::to_string(iter) + " V " + std::to_string(V) + " shape " +
                       std::to_string(shape) + " T " + std::to_string(p.temperature) + " top_k " +
                       std::to_string(p.top_k) + " top_p " + std::to_string(p.top_p) + " min_p " +
                       std::to_string(p.min_p);
    expect_same_as_reference(row, p, tokens, prompt, g(), what);
  }
}

TEST(SamplerEquivalence, SameRowManySeeds) {
  // Many draws from one row: the sampled positions cover the candidate list.
  std::mt19937_64 g(7);
  for (int shape : {0, 1, 2, 7}) {
    std::vector<float> row = random_row(128256, shape, g);
    for (float top_p : {1.0f, 0.9f}) {
      SamplingParams p;
      p.top_p = top_p;
      p.temperature = 0.8f;
      for (uint64_t seed = 0; seed < 40; ++seed)
        expect_same_as_reference(row, p, {}, 0, seed, "shape " + std::to_string(shape) + " seed " + std::to_string(seed));
    }
  }
}

TEST(SamplerEquivalence, DegenerateRows) {
  std::vector<std::vector<float>> rows = {
      std::vector<float>(1000, kNegInf),                // nothing allowed
      std::vector<float>(50000, 3.0f),                  // all equal
      std::vector<float>(50000, 0.0f),                  // all zero
  };
  rows.push_back(rows[0]);
  rows.back()[777] = 1.0f;  // one allowed token
  rows.push_back(rows[1]);
  rows.back()[5] = rows.back()[9] = std::numeric_limits<float>::infinity();  // overflowed logits
  std::mt19937_64 g(11);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int i = 0; i < 40; ++i) {
      SamplingParams p = random_params(int(rows[r].size()), g);
      expect_same_as_reference(rows[r], p, {1, 2, 2, 777}, 1, g(), "row " + std::to_string(r) + " case " + std::to_string(i));
    }
}

TEST(SamplerEquivalence, LogSoftmaxIsUnchanged) {
  std::mt19937_64 g(3);
  for (int shape = 0; shape < 8; ++shape) {
    std::vector<float> row = random_row(30000, shape, g);
    auto want = reference::log_softmax(row.data(), int(row.size()));
    auto got = log_softmax(row.data(), int(row.size()));
    for (size_t i = 0; i < row.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << shape << " " << i;
  }
}

TEST(Sampler, PlainArgmaxOnlyWhenNothingElseIsAsked) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_TRUE(is_plain_argmax(p));
  for (auto change : std::vector<std::function<void(SamplingParams&)>>{
           [](SamplingParams& q) { q.temperature = 0.7f; }, [](SamplingParams& q) { q.repetition_penalty = 1.1f; },
           [](SamplingParams& q) { q.presence_penalty = 0.5f; }, [](SamplingParams& q) { q.frequency_penalty = 0.5f; },
           [](SamplingParams& q) { q.logit_bias = {{3, 1.0f}}; }, [](SamplingParams& q) { q.logprobs = 0; }}) {
    SamplingParams q = p;
    change(q);
    EXPECT_FALSE(is_plain_argmax(q));
  }
}

}  // namespace

// The draw a backend makes (Backend::edit_logits for penalties and logit bias, then sample_rows;
// here the CPU reference every device op is tested against) is the host sampler's: same token
// from the same seed, same random draws.
TEST(SamplerEquivalence, BackendDrawIsTheHostDraw) {
  auto be = make_cpu_backend({.reference = true});
  std::mt19937_64 g(99);
  const int sizes[] = {1, 2, 5, 64, 1000, 40000};
  for (int iter = 0; iter < 400; ++iter) {
    int V = sizes[iter % 6];
    int shape = int(g() % 8);
    std::vector<float> row = random_row(V, shape, g);
    SamplingParams p = random_params(V, g);
    p.logprobs = -1;
    // A bias naming a token twice stays on the host (applied twice, in order); keep its first.
    std::vector<std::pair<int32_t, float>> bias;
    for (auto [t, v] : p.logit_bias)
      if (std::none_of(bias.begin(), bias.end(), [t](const auto& e) { return e.first == t; })) bias.emplace_back(t, v);
    if (bias.size() < p.logit_bias.size()) {
      ASSERT_FALSE(is_backend_drawable(p));
    }
    p.logit_bias = bias;
    ASSERT_TRUE(is_backend_drawable(p));
    std::vector<int32_t> tokens(g() % 200);
    for (int32_t& t : tokens) t = int32_t(g() % uint64_t(V + 3)) - 1;  // a few out of range
    if (tokens.size() > 4)  // repeats, for the frequency penalty
      for (int i = 0; i < 20; ++i) tokens.push_back(tokens[g() % 4]);
    const int prompt = int(g() % (tokens.size() + 3)) - 1;
    const uint64_t seed = g();
    Rng a(seed), b(seed);
    const int32_t want = sample(row.data(), V, p, tokens, prompt, a).token;
    // What the engine does on a GPU: the row edited where it is, then drawn there.
    Tensor x = Tensor::empty(DType::F32, {2, V}), out = Tensor::empty(DType::I32, {2});
    std::copy(row.begin(), row.end(), x.data<float>());
    std::copy(row.begin(), row.end(), x.data<float>() + V);
    std::vector<LogitEdit> edits;
    append_logit_edits(p, tokens, prompt, V, 1, edits);
    be->edit_logits(x, edits);
    ASSERT_TRUE(std::equal(row.begin(), row.end(), x.data<float>())) << "row 0 was not to be edited";
    const RowSampling d = backend_draw(p, b);
    be->sample_rows(x, {d, d}, out);
    std::string what = "iter " + std::to_string(iter) + " V " + std::to_string(V) + " shape " + std::to_string(shape) +
                       " T " + std::to_string(p.temperature) + " top_k " + std::to_string(p.top_k) + " top_p " +
                       std::to_string(p.top_p) + " min_p " + std::to_string(p.min_p);
    ASSERT_EQ(out.data<int32_t>()[1], want) << what;
    ASSERT_TRUE(a == b) << what << ": different random draws";
  }
}

// Sampling held to a grammar: the draw never leaves the allowed tokens, greedy's shortcut picks
// what the whole mask's argmax picks, and stop tokens wait for a complete text.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "engine/constrained.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/vocab.h"

using namespace tessera;

namespace {

constexpr int32_t kStop = 0;

constexpr int32_t kOpen = 26, kClose = 27;  // "<think>", "</think>": special, no bytes

using Tags = std::vector<std::vector<int32_t>>;

Sequence constrained(const char* schema, float temperature, int top_k, bool reasoning = false,
                     bool starts_in_reasoning = false, Tags open = {{kOpen}}, Tags close = {{kClose}}) {
  std::vector<std::string> tokens = {""};  // id 0: the stop token, no bytes
  for (const char* t : {"{", "}", "\"", "\"a\"", ":", " ", ",", "1", "12", "-", "x", "ab", "true", "tr", "ue", "[", "]",
                        "{\"", "\":", "\n", "  ", "null", "\"}", "\xC3", "\xA9", "", "", "a"})
    tokens.push_back(t);
  Sequence s;
  s.params.temperature = temperature;
  s.params.top_k = top_k;
  grammar::Constraint c{grammar::json_schema_grammar(nlohmann::ordered_json::parse(schema)),
                        std::make_shared<const grammar::Vocab>(tokens)};
  if (reasoning) c.reasoning_open = std::move(open), c.reasoning_close = std::move(close), c.starts_in_reasoning = starts_in_reasoning;
  s.params.constraint = std::make_shared<const grammar::Constraint>(std::move(c));
  start_constrained(s);
  s.stop_token_ids = {kStop};
  s.tokens = {1};
  s.num_prompt_tokens = 1;
  s.rng.seed(9);
  return s;
}

// Draws until a stop token (or no token); returns the text.
std::string run(Sequence& s, std::mt19937& rng, bool check_greedy) {
  const auto& vocab = *s.params.constraint->vocab;
  const int V = vocab.size();
  std::string text;
  for (int step = 0; step < 200; ++step) {
    std::vector<float> logits(static_cast<size_t>(V));
    std::normal_distribution<float> normal(0, 2);
    for (float& l : logits) l = normal(rng);
    std::vector<uint8_t> allowed;
    vocab.allowed(*s.matcher, allowed);
    allowed[kStop] = s.matcher->complete();
    auto r = sample_constrained(logits.data(), V, s);
    if (!r) {
      EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 1), 0);
      return text;
    }
    EXPECT_TRUE(allowed[size_t(r->token)]) << text << " + " << r->token;
    if (check_greedy) {
      int32_t best = -1;
      for (int32_t t = 0; t < V; ++t)
        if (allowed[size_t(t)] && (best < 0 || logits[size_t(t)] > logits[size_t(best)])) best = t;
      EXPECT_EQ(r->token, best);
    }
    if (r->token == kStop) return text;
    s.tokens.push_back(r->token);
    advance_constrained(s, r->token);
    text += vocab.bytes(r->token);
  }
  return text;
}

}  // namespace

TEST(Constrained, DrawsStayInTheGrammarAndEndComplete) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
                           "required": ["a"]})";
  std::mt19937 rng(1);
  int finished = 0;
  for (int k = 0; k < 40; ++k) {
    for (auto [temperature, top_k] : {std::pair{0.0f, 0}, std::pair{1.0f, 0}, std::pair{0.7f, 3}}) {
      Sequence s = constrained(schema, temperature, top_k);
      const std::string text = run(s, rng, temperature == 0.0f);
      if (!s.matcher->complete()) continue;  // ran out of steps
      ++finished;
      auto v = nlohmann::json::parse(text);
      ASSERT_TRUE(v.is_object() && v["a"].is_array() && v["a"].size() <= 3) << text;
    }
  }
  EXPECT_GT(finished, 20);  // random logits: many runs end mid-number or mid-indent
}

// A reasoning block is drawn freely: one the prompt leaves open until its close token, or one
// the first token opens (allowed then, and only then); the grammar holds what follows.
TEST(Constrained, ReasoningBlocksAreLeftFree) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
  std::mt19937 rng(4);
  for (bool starts_in_reasoning : {true, false}) {
    Sequence s = constrained(schema, 0.0f, 0, true, starts_in_reasoning);
    const int V = s.params.constraint->vocab->size();
    std::vector<float> logits(static_cast<size_t>(V), 0.0f);
    if (!starts_in_reasoning) {
      EXPECT_TRUE(constrained_now(s));
      logits[kOpen] = 10.0f;  // the model opens a block: allowed as the first token
      auto r = sample_constrained(logits.data(), V, s);
      ASSERT_TRUE(r);
      ASSERT_EQ(r->token, kOpen);
      advance_constrained(s, r->token);
    }
    // Inside the block: not constrained (the engine draws as for any sequence); text the
    // grammar would refuse goes by, then the close token.
    EXPECT_FALSE(constrained_now(s));
    for (int32_t t : {11, 11, 6, 12}) advance_constrained(s, t);  // "x", "x", " ", "ab"
    EXPECT_FALSE(constrained_now(s));
    advance_constrained(s, kClose);
    ASSERT_TRUE(constrained_now(s));
    // After it, the grammar; a second open token is no longer allowed.
    std::fill(logits.begin(), logits.end(), 0.0f);
    logits[kOpen] = 10.0f;
    auto r = sample_constrained(logits.data(), V, s);
    ASSERT_TRUE(r);
    EXPECT_NE(r->token, kOpen);
    advance_constrained(s, r->token);
    const std::string text = s.params.constraint->vocab->bytes(r->token) + run(s, rng, true);
    ASSERT_TRUE(s.matcher->complete()) << text;
    EXPECT_TRUE(nlohmann::json::parse(text)["a"].is_number_integer()) << text;
  }
  // Without reasoning tokens the open token is just an unallowed token.
  Sequence plain = constrained(schema, 0.0f, 0);
  std::vector<float> logits(static_cast<size_t>(plain.params.constraint->vocab->size()), 0.0f);
  logits[kOpen] = 10.0f;
  EXPECT_NE(sample_constrained(logits.data(), int(logits.size()), plain)->token, kOpen);
}

// Tags of several tokens (Gemma 4 opens with <|channel> then "thought"): once the open tag's
// first token is drawn its next ones are the only tokens allowed, whatever the logits; the
// block is free until the whole close tag, and a close tag's first token alone does not end it.
TEST(Constrained, ReasoningTagsOfSeveralTokens) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
  constexpr int32_t kX = 11, kSpace = 6, kAb = 12;  // "x", " ", "ab"
  // Two open tags sharing a prefix (as Gemma 4's with and without its newline); the shorter ends it.
  const Tags open = {{kOpen, kX, kSpace}, {kOpen, kX}}, close = {{kClose, kAb}};
  std::mt19937 rng(6);
  for (float temperature : {0.0f, 1.0f}) {
    Sequence s = constrained(schema, temperature, 0, true, false, open, close);
    const int V = s.params.constraint->vocab->size();
    std::vector<float> logits(static_cast<size_t>(V), 0.0f);
    logits[kOpen] = 10.0f;
    auto r = sample_constrained(logits.data(), V, s);
    ASSERT_TRUE(r && r->token == kOpen);
    s.tokens.push_back(kOpen);
    advance_constrained(s, kOpen);
    // Inside the tag: drawn under the constraint, and only "x" can come, even against the logits
    // and where the grammar would take "{" or the stop token.
    EXPECT_TRUE(constrained_now(s));
    std::fill(logits.begin(), logits.end(), 0.0f);
    logits[1] = 20.0f, logits[kStop] = 20.0f, logits[kX] = -20.0f;
    for (int k = 0; k < 20; ++k) {
      Sequence copy = s;
      r = sample_constrained(logits.data(), V, copy);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->token, kX);
    }
    advance_constrained(s, kX);
    EXPECT_FALSE(constrained_now(s));  // "<open> x" is a whole tag: the block is open
    // The close tag's first token, then text: still free; then the whole close tag.
    for (int32_t t : {kClose, kX, kSpace, kClose}) {
      advance_constrained(s, t);
      EXPECT_FALSE(constrained_now(s));
    }
    advance_constrained(s, kAb);
    ASSERT_TRUE(constrained_now(s));
    const std::string text = run(s, rng, temperature == 0.0f);
    if (s.matcher->complete()) {
      EXPECT_TRUE(nlohmann::json::parse(text)["a"].is_number_integer()) << text;
    }
  }
  // A token off the open tag's path after its first is refused, not read as output.
  Sequence s = constrained(schema, 0.0f, 0, true, false, open, close);
  advance_constrained(s, kOpen);
  EXPECT_THROW(advance_constrained(s, 1), tessera::Error);
}

// Before min_tokens a complete text does not stop while the grammar can go on; where it cannot,
// the stop token is allowed (the grammar's end comes first).
TEST(Constrained, MinTokensHoldsTheStopWhileTheTextCanGoOn) {
  constexpr int32_t kOne = 8;  // "1"
  Sequence n = constrained(R"({"type": "integer"})", 0.0f, 0);
  n.min_tokens = 4;
  const int V = n.params.constraint->vocab->size();
  std::vector<float> logits(static_cast<size_t>(V), 0.0f);
  logits[kStop] = 50.0f;
  logits[kOne] = 1.0f;  // then more digits (whitespace would end the number, and the text)
  n.tokens.push_back(kOne);
  advance_constrained(n, kOne);
  while (n.num_generated() < n.min_tokens) {
    ASSERT_TRUE(n.matcher->complete()) << "without min_tokens the stop would be drawn here";
    auto r = sample_constrained(logits.data(), V, n);
    ASSERT_TRUE(r);
    ASSERT_NE(r->token, kStop) << "after " << n.num_generated() << " tokens";
    n.tokens.push_back(r->token);
    advance_constrained(n, r->token);
  }
  ASSERT_TRUE(n.matcher->complete());
  auto r = sample_constrained(logits.data(), V, n);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->token, kStop) << "from min_tokens on";

  // A grammar that ends: after "1" nothing can follow, so the stop comes before min_tokens.
  Sequence one = n;
  one.params.constraint = std::make_shared<const grammar::Constraint>(
      grammar::Constraint{grammar::regex_grammar("1"), n.params.constraint->vocab});
  start_constrained(one);
  one.tokens = {1};
  one.tokens.push_back(kOne);
  advance_constrained(one, kOne);
  ASSERT_LT(one.num_generated(), one.min_tokens);
  r = sample_constrained(logits.data(), V, one);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->token, kStop);
}

// Sampling held to a grammar: the draw never leaves the allowed tokens, greedy's shortcut picks
// what the whole mask's argmax picks, and stop tokens wait for a complete text.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "engine/constrained.h"
#include "grammar/json_schema.h"
#include "grammar/vocab.h"

using namespace tessera;

namespace {

constexpr int32_t kStop = 0;

Sequence constrained(const char* schema, float temperature, int top_k) {
  std::vector<std::string> tokens = {""};  // id 0: the stop token, no bytes
  for (const char* t : {"{", "}", "\"", "\"a\"", ":", " ", ",", "1", "12", "-", "x", "ab", "true", "tr", "ue", "[", "]",
                        "{\"", "\":", "\n", "  ", "null", "\"}", "\xC3", "\xA9"})
    tokens.push_back(t);
  Sequence s;
  s.params.temperature = temperature;
  s.params.top_k = top_k;
  s.params.constraint = std::make_shared<const grammar::Constraint>(grammar::Constraint{
      grammar::json_schema_grammar(nlohmann::ordered_json::parse(schema)),
      std::make_shared<const grammar::Vocab>(tokens)});
  s.matcher.emplace(s.params.constraint->grammar);
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

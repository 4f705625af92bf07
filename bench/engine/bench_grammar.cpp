// Structured output's host cost per generated token at a real vocabulary: the allowed-token
// mask (grammar::Vocab::allowed, what every sampled draw of a constrained sequence computes), a
// greedy draw (sample_constrained, which tries the best candidates before any mask) and the
// matcher's advance by one token, at points of a JSON object where different tokens fit. The
// peer is the unconstrained draw at the same vocabulary (sample(), greedy and T 0.8 top-p 0.95).
// Also the one-time cost: the vocabulary's trie, and compiling the schema.
//
// Times are thread CPU time, the best of the repeats.
// Usage: bench_grammar TOKENIZER_DIR [REPEATS (default 5)]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/constrained.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/vocab.h"
#include "thread_cpu.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tessera;

template <class F>
double best_us(int repeats, int inner, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = thread_cpu();
    for (int i = 0; i < inner; ++i) f();
    best = std::min(best, (thread_cpu() - t0) / inner * 1e6);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_grammar TOKENIZER_DIR [REPEATS]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  Tokenizer tok = Tokenizer::load(argv[1]);
  const int V = tok.vocab_size();

  double t0 = thread_cpu();
  auto vocab = std::make_shared<const grammar::Vocab>(tok.all_token_bytes());
  const double vocab_ms = (thread_cpu() - t0) * 1e3;

  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string", "maxLength": 64},
      "tags": {"type": "array", "items": {"type": "string"}}, "address": {"type": "object", "properties": {
      "street": {"type": "string"}, "city": {"type": "string"}}, "required": ["city"]}}, "required": ["name", "age"]})");
  auto grammar_ptr = grammar::json_schema_grammar(schema);
  const double compile_us = best_us(repeats, 20, [&] { grammar::json_schema_grammar(schema); });

  // LLM-like logits: N(0, 2.5) with a few tokens far above.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> logits(static_cast<size_t>(V));
  for (float& l : logits) l = normal(rng);
  for (int k = 0; k < 8; ++k) logits[rng() % size_t(V)] += 15.0f;

  std::printf("bench_grammar: %s, vocabulary %d; best of %d\n", argv[1], V, repeats);
  std::printf("one-time: token bytes + trie %.1f ms; schema compiled in %.1f us\n\n", vocab_ms, compile_us);
  std::printf("| point in the text | allowed tokens | mask (us) | greedy draw (us) | advance (us) |\n");
  std::printf("|---|---|---|---|---|\n");
  const std::pair<const char*, const char*> points[] = {
      {"start", ""},
      {"a key", "{\"name\": \"Ada\", "},
      {"in a string", "{\"name\": \"Ada Lov"},
      {"in a string of at most 64", "{\"name\": \"Ada\", \"age\": 36, \"email\": \"ada@ex"},
      {"in a number", "{\"name\": \"Ada\", \"age\": 3"},
      {"in an array", "{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"x\", "},
  };
  for (auto [name, prefix] : points) {
    Sequence s;
    s.params.temperature = 0.0f;
    s.params.constraint = std::make_shared<const grammar::Constraint>(grammar::Constraint{grammar_ptr, vocab});
    s.matcher.emplace(grammar_ptr);
    if (!s.matcher->advance(prefix)) {
      std::fprintf(stderr, "prefix not in the grammar: %s\n", prefix);
      return 1;
    }
    s.stop_token_ids = tok.eos_ids();
    s.tokens = {1};
    s.num_prompt_tokens = 1;
    std::vector<uint8_t> allowed;
    vocab->allowed(*s.matcher, allowed);
    long n = 0;
    for (uint8_t a : allowed) n += a;
    const double mask = best_us(repeats, 3, [&] { vocab->allowed(*s.matcher, allowed); });
    const double greedy = best_us(repeats, 3, [&] { sample_constrained(logits.data(), V, s); });
    const int32_t one = sample_constrained(logits.data(), V, s)->token;
    const double advance = best_us(repeats, 100, [&] {
      grammar::Matcher m = *s.matcher;
      if (one >= 0 && one < vocab->size()) m.advance(vocab->bytes(one));
    });
    std::printf("| %s | %ld | %.0f | %.0f | %.1f |\n", name, n, mask, greedy, advance);
  }
  // A whole document, token by token as a sampled request meets it: the mask of each state
  // (walked, or from the sequence's MaskCache) and the advance. Each token must be allowed.
  const std::string doc = R"({"name": "Ada Lovelace, Countess of Lovelace", "age": 36, "email": "ada@example.org",
  "tags": ["mathematician", "writer", "the first published algorithm for a computing machine"],
  "address": {"street": "St James's Square", "city": "London"}})";
  const std::vector<int32_t> ids = tok.encode(doc);
  for (bool cached : {false, true}) {
    double total = 0;
    for (int r = 0; r < repeats; ++r) {
      grammar::Matcher m(grammar_ptr);
      grammar::MaskCache cache;
      std::vector<uint8_t> allowed;
      const double t = thread_cpu();
      for (int32_t id : ids) {
        if (cached) cache.allowed(*vocab, m, allowed);
        else vocab->allowed(m, allowed);
        if (!allowed[size_t(id)] || !m.advance(vocab->bytes(id))) {
          std::fprintf(stderr, "token %d of the document not allowed\n", id);
          return 1;
        }
      }
      const double us = (thread_cpu() - t) / double(ids.size()) * 1e6;
      total = r == 0 ? us : std::min(total, us);
    }
    std::printf("%s: a %zu-token document, %.0f us a token for its masks and advances\n",
                cached ? "with the mask cache (as the engine runs)" : "every mask walked", ids.size(), total);
  }

  // An ambiguous pattern: after 40 a's, (.?){100}x is in ~60 places at once. The walk gives
  // up at its budget (about 24 s before there was one).
  {
    grammar::Matcher m(grammar::regex_grammar("(.?){100}x"));
    m.advance(std::string(40, 'a'));
    std::vector<uint8_t> allowed;
    const double t = thread_cpu();
    try {
      vocab->allowed(m, allowed);
      std::printf("an ambiguous pattern, (.?){100}x after 40 a's: mask %.0f us\n", (thread_cpu() - t) * 1e6);
    } catch (const std::exception& e) {
      std::printf("an ambiguous pattern, (.?){100}x after 40 a's: refused after %.0f us (%s)\n", (thread_cpu() - t) * 1e6,
                  e.what());
    }
  }

  SamplingParams greedy_p, nucleus;
  greedy_p.temperature = 0.0f;
  nucleus.temperature = 0.8f, nucleus.top_p = 0.95f;
  Rng r(1);
  const std::vector<int32_t> none;
  std::printf("\nunconstrained sample(): greedy %.0f us, T 0.8 top-p 0.95 %.0f us\n",
              best_us(repeats, 10, [&] { sample(logits.data(), V, greedy_p, none, 0, r); }),
              best_us(repeats, 10, [&] { sample(logits.data(), V, nucleus, none, 0, r); }));
  return 0;
}

#include "engine/constrained.h"

#include <algorithm>

#include "core/error.h"
#include "grammar/vocab.h"

namespace tessera {

namespace {

using Phase = Sequence::GrammarPhase;

bool contains(const std::vector<int32_t>& ids, int32_t t) { return std::find(ids.begin(), ids.end(), t) != ids.end(); }
bool is_stop(const Sequence& s, int32_t t) { return contains(s.stop_token_ids, t); }
// Before any output, the token that opens a reasoning block.
bool opens_reasoning(const Sequence& s, int32_t t) {
  return s.grammar_phase == Phase::Start && contains(s.params.constraint->reasoning_open, t);
}

bool allows(const Sequence& s, const grammar::Vocab& vocab, int32_t t) {
  if (opens_reasoning(s, t)) return true;
  if (is_stop(s, t)) return s.matcher->complete();
  return t < vocab.size() && !vocab.bytes(t).empty() && s.matcher->accepts(vocab.bytes(t));
}

// Greedy's pick without the whole mask: the best few candidates in argmax's order (larger
// value, then lower id), the first the grammar allows; -1 when none of them is.
int32_t greedy_pick(const float* logits, int V, const Sequence& s, const grammar::Vocab& vocab) {
  constexpr int kCandidates = 32;
  for (int32_t t : best_ids(logits, V, kCandidates))
    if (allows(s, vocab, t)) return t;
  return -1;
}

}  // namespace

void start_constrained(Sequence& s) {
  const auto& c = s.params.constraint;
  if (!c) return;
  s.matcher.emplace(c->grammar);
  s.grammar_phase = c->starts_in_reasoning && !c->reasoning_close.empty() ? Phase::Reasoning : Phase::Start;
}

bool constrained_now(const Sequence& s) { return s.matcher && s.grammar_phase != Phase::Reasoning; }

std::optional<SampleResult> sample_constrained(const float* logits, int V, Sequence& s) {
  TESSERA_CHECK(s.matcher && s.params.constraint, "sample_constrained: the sequence has no grammar");
  const grammar::Vocab& vocab = *s.params.constraint->vocab;
  std::vector<uint8_t> allowed;
  // Greedy with nothing that edits the row: its argmax among the allowed tokens, usually one of
  // the first few candidates, is found without walking the vocabulary.
  if (s.params.temperature <= 0.0f && !has_penalties(s.params)) {
    if (int32_t t = greedy_pick(logits, V, s, vocab); t >= 0) {
      if (s.params.logprobs < 0) return SampleResult{t};  // nothing else to report
      allowed.assign(size_t(V), 0);
      allowed[size_t(t)] = 1;
    }
  }
  if (allowed.empty()) {
    s.masks.allowed(vocab, *s.matcher, allowed);
    allowed.resize(size_t(V), 0);
    for (int32_t t : s.stop_token_ids)
      if (t >= 0 && t < V) allowed[size_t(t)] = s.matcher->complete();
    if (s.grammar_phase == Phase::Start)
      for (int32_t t : s.params.constraint->reasoning_open)
        if (t >= 0 && t < V) allowed[size_t(t)] = 1;
    if (std::find(allowed.begin(), allowed.end(), 1) == allowed.end()) return std::nullopt;
  }
  return sample(logits, V, s.params, s.tokens, s.num_prompt_tokens, s.rng, allowed.data());
}

void advance_constrained(Sequence& s, int32_t token) {
  const grammar::Constraint& c = *s.params.constraint;
  if (s.grammar_phase == Phase::Reasoning) {
    if (contains(c.reasoning_close, token)) s.grammar_phase = Phase::Output;
    return;
  }
  if (opens_reasoning(s, token)) {
    s.grammar_phase = c.reasoning_close.empty() ? Phase::Output : Phase::Reasoning;
    return;
  }
  s.grammar_phase = Phase::Output;
  const grammar::Vocab& vocab = *c.vocab;
  TESSERA_CHECK(token >= 0 && token < vocab.size() && s.matcher->advance(vocab.bytes(token)),
                "engine: a constrained sequence drew a token its grammar does not allow");
}

}  // namespace tessera

#include "engine/constrained.h"

#include <algorithm>

#include "core/error.h"
#include "grammar/vocab.h"

namespace tessera {

namespace {

using Phase = Sequence::GrammarPhase;

bool contains(const std::vector<int32_t>& ids, int32_t t) { return std::find(ids.begin(), ids.end(), t) != ids.end(); }
bool is_stop(const Sequence& s, int32_t t) { return contains(s.stop_token_ids, t); }

// The tokens that may come next in a reasoning block's open tag: before any output the first of
// each tag, inside one (Opening) the next of each tag that begins with what was drawn.
std::vector<int32_t> open_tag_next(const Sequence& s) {
  std::vector<int32_t> next;
  if (s.grammar_phase != Phase::Start && s.grammar_phase != Phase::Opening) return next;
  const std::vector<int32_t>& drawn = s.tag_tokens;
  for (const auto& tag : s.params.constraint->reasoning_open)
    if (tag.size() > drawn.size() && std::equal(drawn.begin(), drawn.end(), tag.begin()))
      next.push_back(tag[drawn.size()]);
  return next;
}

// Whether t may be drawn, `open_next` being open_tag_next(s): inside an open tag only its next
// token is.
bool allows(const Sequence& s, const grammar::Vocab& vocab, const std::vector<int32_t>& open_next, int32_t t) {
  if (contains(open_next, t)) return true;
  if (s.grammar_phase == Phase::Opening) return false;
  if (is_stop(s, t)) return s.matcher->complete() && s.num_generated() >= s.min_tokens;
  return t < vocab.size() && !vocab.bytes(t).empty() && s.matcher->accepts(vocab.bytes(t));
}

// Greedy's pick without the whole mask: the best few candidates in argmax's order (larger
// value, then lower id), the first the grammar allows; -1 when none of them is.
int32_t greedy_pick(const float* logits, int V, const Sequence& s, const grammar::Vocab& vocab) {
  constexpr int kCandidates = 32;
  const std::vector<int32_t> open_next = open_tag_next(s);
  for (int32_t t : best_ids(logits, V, kCandidates))
    if (allows(s, vocab, open_next, t)) return t;
  return -1;
}

// In a reasoning block: t drawn; whether the tokens drawn now end with a close tag.
bool closes_reasoning(Sequence& s, int32_t t) {
  const auto& close = s.params.constraint->reasoning_close;
  size_t longest = 0;
  for (const auto& tag : close) longest = std::max(longest, tag.size());
  std::vector<int32_t>& tail = s.tag_tokens;
  tail.push_back(t);
  if (tail.size() > longest) tail.erase(tail.begin(), tail.end() - std::ptrdiff_t(longest));
  for (const auto& tag : close) {
    const auto n = std::ptrdiff_t(tag.size());
    if (n > 0 && std::ptrdiff_t(tail.size()) >= n && std::equal(tag.begin(), tag.end(), tail.end() - n)) return true;
  }
  return false;
}

}  // namespace

void start_constrained(Sequence& s) {
  const auto& c = s.params.constraint;
  if (!c) return;
  s.matcher.emplace(c->grammar);
  s.tag_tokens.clear();
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
      if (s.params.logprobs < 0)
        return SampleResult{.token = t, .logprob = 0, .top = {}};  // nothing else to report
      allowed.assign(size_t(V), 0);
      allowed[size_t(t)] = 1;
    }
  }
  if (allowed.empty()) {
    if (s.grammar_phase == Phase::Opening) {
      allowed.assign(size_t(V), 0);
    } else {
      s.masks.allowed(vocab, *s.matcher, allowed);
      allowed.resize(size_t(V), 0);
      // A complete text may stop, from min_tokens on or where the grammar allows nothing more.
      const bool stop =
          s.matcher->complete() && (s.num_generated() >= s.min_tokens ||
                                    std::find(allowed.begin(), allowed.end(), 1) == allowed.end());
      for (int32_t t : s.stop_token_ids)
        if (t >= 0 && t < V) allowed[size_t(t)] = stop;
    }
    for (int32_t t : open_tag_next(s))
      if (t >= 0 && t < V) allowed[size_t(t)] = 1;
    if (std::find(allowed.begin(), allowed.end(), 1) == allowed.end()) return std::nullopt;
  }
  return sample(logits, V, s.params, s.tokens, s.num_prompt_tokens, s.rng, allowed.data());
}

void advance_constrained(Sequence& s, int32_t token) {
  const grammar::Constraint& c = *s.params.constraint;
  if (s.grammar_phase == Phase::Reasoning) {
    if (closes_reasoning(s, token)) s.grammar_phase = Phase::Output, s.tag_tokens.clear();
    return;
  }
  if (contains(open_tag_next(s), token)) {
    s.tag_tokens.push_back(token);
    if (std::find(c.reasoning_open.begin(), c.reasoning_open.end(), s.tag_tokens) == c.reasoning_open.end()) {
      s.grammar_phase = Phase::Opening;  // more of the tag to come
      return;
    }
    s.tag_tokens.clear();
    s.grammar_phase = c.reasoning_close.empty() ? Phase::Output : Phase::Reasoning;
    return;
  }
  TESSERA_CHECK(s.grammar_phase != Phase::Opening, "engine: a constrained sequence left a reasoning block's open tag");
  s.grammar_phase = Phase::Output;
  const grammar::Vocab& vocab = *c.vocab;
  TESSERA_CHECK(token >= 0 && token < vocab.size() && s.matcher->advance(vocab.bytes(token)),
                "engine: a constrained sequence drew a token its grammar does not allow");
}

}  // namespace tessera

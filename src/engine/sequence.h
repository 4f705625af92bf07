// One request's state: plain data, owned by the engine, read by the scheduler and the runner.
// There is no prefill or decode phase: a sequence has tokens and a count of those already in
// the KV cache; each step computes some of the rest.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/sampler.h"
#include "grammar/vocab.h"

namespace tessera {

enum class SeqStatus { Waiting, Running, Finished };
enum class FinishReason { None, Stop, Length, Abort };

struct Sequence {
  int64_t id = 0;
  std::vector<int32_t> tokens;          // prompt, then generated tokens
  int num_prompt_tokens = 0;
  int num_computed_tokens = 0;          // tokens whose K/V are in the cache
  int num_cached_tokens = 0;            // prompt tokens found in the prefix cache
  std::vector<int32_t> block_table;     // KV blocks holding tokens [i*block_size, (i+1)*block_size)
  std::vector<uint64_t> block_hashes;   // chained hashes of the full blocks registered so far

  SamplingParams params;
  // -1: none; N >= 0: each prompt token's logprob given the tokens before it, with the top N.
  // Such a sequence computes its whole prompt (no prefix-cache hits).
  int prompt_logprobs = -1;
  std::vector<SampleResult> prompt_scores;  // [num_prompt_tokens - 1]: tokens 1.. of the prompt
  int max_tokens = 0;                   // generated tokens allowed
  std::vector<int32_t> stop_token_ids;  // finish when one is generated (EOS unless ignored)
  // Before min_tokens are generated the stop tokens are not drawn: its draws take
  // min_tokens_params, the params with those tokens' logits biased to -inf.
  int min_tokens = 0;
  SamplingParams min_tokens_params;
  Rng rng;
  std::optional<grammar::Matcher> matcher;  // with params.constraint: where the output stands in it
  grammar::MaskCache masks;                  // the allowed tokens of its matcher's recent states
  // With params.constraint: nothing drawn under it yet (a reasoning block may still open), inside
  // an open tag of several tokens (its next token forced), in a reasoning block (drawn freely),
  // or in the output the grammar holds.
  enum class GrammarPhase { Start, Opening, Reasoning, Output } grammar_phase = GrammarPhase::Start;
  // Opening: the open tag's tokens drawn so far. Reasoning: the last tokens drawn, as many as the
  // longest close tag has, where a close tag of several tokens shows.
  std::vector<int32_t> tag_tokens;

  SeqStatus status = SeqStatus::Waiting;
  FinishReason finish_reason = FinishReason::None;

  int num_tokens() const { return int(tokens.size()); }
  int num_generated() const { return num_tokens() - num_prompt_tokens; }
  // The parameters of its next draw.
  const SamplingParams& draw_params() const {
    return num_generated() < min_tokens ? min_tokens_params : params;
  }
  // Whether its steps still score the prompt (prompt_logprobs, until the first token).
  bool scores_prompt() const { return prompt_logprobs >= 0 && num_generated() == 0; }
};

}  // namespace tessera

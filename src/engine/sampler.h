// Sampling, in one place for every caller (generate, the server): penalties, logit bias,
// temperature, top-k, top-p, min-p, and a seeded RNG per sequence.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace tessera {

namespace grammar {
struct Constraint;
}

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy
  int top_k = 0;                    // 0 or negative: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;  // on prompt and output tokens (divides positive logits)
  float presence_penalty = 0.0f;    // OpenAI style, on output tokens
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  int logprobs = -1;                // -1: none; N >= 0: the sampled token's logprob and the top N
  // Structured output: the generated text is held to this grammar (engine/constrained.h).
  std::shared_ptr<const grammar::Constraint> constraint;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0;                            // of the model's own distribution (before penalties)
  std::vector<std::pair<int32_t, float>> top;   // top-N (id, logprob), most likely first
};

// Seeded per sequence; a sequence with the same seed samples the same tokens every run.
using Rng = std::mt19937_64;

// logits: one row of vocab_size; prompt/output: the sequence's tokens so far (for penalties).
// Greedy with nothing that changes the logits or needs their distribution: the token is the
// logits' argmax, which the backend can take where the logits are.
bool is_plain_argmax(const SamplingParams& p);
// Penalties or logit bias: the row changes before the draw.
bool has_penalties(const SamplingParams& p);
// Nothing a backend's draw lacks: the draw can be made where the logits are, as
// append_logit_edits() and then Backend::sample_rows() or argmax_rows(), with logprobs (up to
// kMaxBackendLogprobs of them) by Backend::logprobs(). Not where a logit bias names a token twice
// (applied twice in order on the host).
constexpr int kMaxBackendLogprobs = 20;
bool is_backend_drawable(const SamplingParams& p);
// The draw sample() would make for these parameters, for Backend::sample_rows(): its uniform is
// taken from rng exactly as sample() takes it, so a seed gives the same tokens either way.
RowSampling backend_draw(const SamplingParams& p, Rng& rng);
// The changes sample() makes to the row of a sequence with `tokens` (the first num_prompt_tokens
// its prompt) for penalties and logit bias, as edits of row `row` for Backend::edit_logits(): one
// per token touched, with the same values and operations.
void append_logit_edits(const SamplingParams& p, const std::vector<int32_t>& tokens, int num_prompt_tokens,
                        int vocab_size, int32_t row, std::vector<LogitEdit>& out);

// allowed (null: every token): 1 for the tokens the draw may choose (at least one); the others
// are ruled out after penalties and bias. Logprobs stay those of the model's own row.
SampleResult sample(const float* logits, int vocab_size, const SamplingParams& params,
                    const std::vector<int32_t>& tokens, int num_prompt_tokens, Rng& rng,
                    const uint8_t* allowed = nullptr);

// The ids of the k largest logits (at most n), in argmax's order: larger value first, then
// lower id.
std::vector<int32_t> best_ids(const float* logits, int n, int k);

// Natural-log softmax of a row, in double for accuracy (logprobs are reported to users).
std::vector<float> log_softmax(const float* logits, int n);

}  // namespace tessera

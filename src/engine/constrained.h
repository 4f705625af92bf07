// Sampling held to a grammar (structured output): the draw of a sequence whose params carry a
// grammar::Constraint chooses only among the tokens the grammar allows after the text so far,
// and a stop token only once that text is a whole sentence of it.
#pragma once
#include <optional>

#include "engine/sequence.h"

namespace tessera {

// Sets up s's matcher and phase from its params.constraint (none: nothing to do).
void start_constrained(Sequence& s);

// Whether s's next token is drawn under its grammar (it has one, and is not reasoning).
bool constrained_now(const Sequence& s);

// sample()'s draw for s over the allowed tokens (before any output, a reasoning block's open
// tag too, and inside that tag only its next token); none when no token is allowed (the text is a
// whole sentence that cannot go on, and the sequence has no stop token). Once the text cannot
// go on, only the stop tokens are allowed: the sequence ends with one, as unconstrained ones do.
// Before s.min_tokens the stop tokens are allowed only where nothing else is.
std::optional<SampleResult> sample_constrained(const float* logits, int vocab_size, Sequence& s);

// Reads a drawn token (not a stop token) into s's matcher, or moves s between the phases.
void advance_constrained(Sequence& s, int32_t token);

}  // namespace tessera

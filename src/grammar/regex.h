// Regular expressions to byte grammars: vLLM's guided_regex and structured_outputs.regex (the
// whole output matches), and a JSON Schema string's pattern (its characters as a JSON string
// writes them).
//
// Supported: literal characters and escapes (\n \t \r \f \v \0 \xHH \uHHHH \U00HHHHHH, and any
// escaped punctuation), . (any character but a newline), classes [...] with ranges, negation
// and \d \w \s \D \W \S, groups (...) (?:...) (?<name>...) (?P<name>...), alternation |,
// quantifiers * + ? {m} {m,} {m,n} (their lazy and possessive forms match the same texts), ^ at
// the start and $ at the end. Refused with a tessera::Error naming the position:
// backreferences, lookarounds, \b, anchors elsewhere, inline flags.
#pragma once
#include <memory>
#include <string_view>

#include "grammar/grammar.h"

namespace tessera::grammar {

struct RegexRule {
  int rule;                  // a rule of the grammar matching the pattern's texts
  bool anchored_start = false, anchored_end = false;  // it began with ^ / ended with $
};
// Adds the pattern to g; json_string: each character in its JSON string form (grammar/code_points.h).
RegexRule add_regex(Grammar& g, std::string_view pattern, bool json_string);

// A grammar whose sentences are the texts the pattern matches whole.
std::shared_ptr<const Grammar> regex_grammar(std::string_view pattern);

}  // namespace tessera::grammar

// Sets of Unicode code points in grammars: ranges, their UTF-8 byte forms, and a rule that
// reads one character of a set, as raw UTF-8 or as a JSON string writes it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

using Range = std::pair<uint32_t, uint32_t>;  // code points [first, second]

std::string utf8(uint32_t cp);
// The code point of the valid UTF-8 at s[i], i moved past it; kNotACharacter (i unmoved) where
// s[i] starts no valid character.
constexpr uint32_t kNotACharacter = ~0u;
uint32_t read_utf8(std::string_view s, size_t& i);
// Whether s is valid UTF-8 with no control byte, '"' or '\\': text a JSON string holds as it is.
bool plain_text(std::string_view s);
// Sorted, merged, without the UTF-16 surrogates (which are not characters).
std::vector<Range> normalized(std::vector<Range> ranges);
// Every character not in the ranges.
std::vector<Range> complement(const std::vector<Range>& ranges);
// A new rule of g reading one character of the ranges (not empty): its UTF-8 bytes, or with
// json_string its form inside a JSON string (", \ and control characters escaped: \n, \t,
// \r, \b, \f, else \u00XX).
int character_rule(Grammar& g, const std::vector<Range>& ranges, bool json_string);
// Its alternatives (each begins with a byte, no byte in two), for a rule that adds its own.
std::vector<std::vector<Grammar::Symbol>> character_alternatives(Grammar& g, const std::vector<Range>& ranges,
                                                                bool json_string);

}  // namespace tessera::grammar

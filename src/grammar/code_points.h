// Sets of Unicode code points in grammars: ranges, their UTF-8 byte forms, and a rule that
// reads one character of a set, as raw UTF-8 or as a JSON string writes it.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

using Range = std::pair<uint32_t, uint32_t>;  // code points [first, second]

std::string utf8(uint32_t cp);
// Sorted, merged, without the UTF-16 surrogates (which are not characters).
std::vector<Range> normalized(std::vector<Range> ranges);
// Every character not in the ranges.
std::vector<Range> complement(const std::vector<Range>& ranges);
// A new rule of g reading one character of the ranges (not empty): its UTF-8 bytes, or with
// json_string its form inside a JSON string (", \ and control characters escaped: \n, \t,
// \r, \b, \f, else \u00XX).
int character_rule(Grammar& g, const std::vector<Range>& ranges, bool json_string);

}  // namespace tessera::grammar

// Text scanning shared by the parsers: finding markers that may be cut by the end of the text
// seen so far, balanced JSON, trimming.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::tools {

struct MarkerHit {
  size_t pos = std::string_view::npos;  // npos: no marker, not even a cut one
  int marker = -1;                      // index into the marker list
  bool partial = false;                 // the text ends inside the marker: wait for more
};

// The earliest position where a marker starts. A marker cut by the end of `text` counts (as
// partial) unless `at_eof`. Where several match at one position the longest full one wins,
// and a longer one that may still match makes the hit partial.
MarkerHit find_marker(std::string_view text, const std::vector<std::string>& markers, bool at_eof);

// Length of the JSON value (object or array) that opens `text` at `start`, strings and escapes
// respected; nullopt while it is not closed.
std::optional<size_t> json_value_end(std::string_view text, size_t start);

// Position of `needle` at or after `from`, skipping double-quoted JSON strings.
size_t find_outside_strings(std::string_view text, std::string_view needle, size_t from);

std::string_view trim(std::string_view s);
bool is_space(char c);

}  // namespace tessera::tools

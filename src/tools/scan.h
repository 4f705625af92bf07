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

// Where a scan of a growing text stopped, so that the next scan goes on from there rather than
// starting over (streaming a long call would otherwise cost quadratic time).
struct ScanState {
  size_t pos = 0;
  bool in_string = false;  // inside a double-quoted JSON string
  int depth = 0;           // open JSON brackets
  char quote = 0;          // the quote of an open Python string
};

// Length of the JSON value (object or array) that opens `text` at `start`, strings and escapes
// respected; nullopt while it is not closed.
std::optional<size_t> json_value_end(std::string_view text, size_t start);
// The same, resumable: scanning starts at state.pos; returns the end position.
std::optional<size_t> json_value_end(std::string_view text, ScanState& state);

// Position of `needle` at or after state.pos, skipping double-quoted JSON strings; npos while
// not found.
size_t find_outside_strings(std::string_view text, std::string_view needle, ScanState& state);

std::string_view trim(std::string_view s);
bool is_space(char c);

}  // namespace tessera::tools

#include "tools/scan.h"

namespace tessera::tools {

MarkerHit find_marker(std::string_view text, const std::vector<std::string>& markers, bool at_eof) {
  for (size_t pos = 0; pos < text.size(); ++pos) {
    MarkerHit hit;
    size_t best_len = 0;
    bool waiting = false;
    for (size_t m = 0; m < markers.size(); ++m) {
      std::string_view marker = markers[m];
      std::string_view rest = text.substr(pos);
      if (rest.size() >= marker.size()) {
        if (rest.substr(0, marker.size()) == marker && marker.size() > best_len) {
          best_len = marker.size();
          hit = {pos, static_cast<int>(m), false};
        }
      } else if (!at_eof && marker.substr(0, rest.size()) == rest) {
        waiting = true;
        if (hit.marker < 0) hit = {pos, static_cast<int>(m), true};
      }
    }
    if (waiting) hit.partial = true;
    if (hit.marker >= 0) return hit;
  }
  return {};
}

std::optional<size_t> json_value_end(std::string_view text, ScanState& state) {
  for (size_t& i = state.pos; i < text.size(); ++i) {
    char c = text[i];
    if (state.in_string) {
      if (c == '\\') {
        if (i + 1 == text.size()) return std::nullopt;  // resume at the backslash
        ++i;
      } else if (c == '"') {
        state.in_string = false;
      }
      continue;
    }
    if (c == '"') state.in_string = true;
    else if (c == '{' || c == '[') ++state.depth;
    else if ((c == '}' || c == ']') && --state.depth == 0) return ++i;
  }
  return std::nullopt;
}

std::optional<size_t> json_value_end(std::string_view text, size_t start) {
  ScanState state{start};
  auto end = json_value_end(text, state);
  if (!end) return std::nullopt;
  return *end - start;
}

size_t find_outside_strings(std::string_view text, std::string_view needle, ScanState& state) {
  for (size_t& i = state.pos; i < text.size(); ++i) {
    char c = text[i];
    if (state.in_string) {
      if (c == '\\') {
        if (i + 1 == text.size()) return std::string_view::npos;
        ++i;
      } else if (c == '"') {
        state.in_string = false;
      }
      continue;
    }
    // The needle may still be arriving: look again from here next time.
    if (i + needle.size() > text.size()) return std::string_view::npos;
    if (text.substr(i, needle.size()) == needle) return i;
    if (c == '"') state.in_string = true;
  }
  return std::string_view::npos;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace tessera::tools

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

std::optional<size_t> json_value_end(std::string_view text, size_t start) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1 - start;
    }
  }
  return std::nullopt;
}

size_t find_outside_strings(std::string_view text, std::string_view needle, size_t from) {
  bool in_string = false;
  for (size_t i = from; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (text.substr(i, needle.size()) == needle) return i;
    if (c == '"') in_string = true;
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

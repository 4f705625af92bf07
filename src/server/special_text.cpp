#include "server/special_text.h"

#include <algorithm>

namespace tessera::server {

SpecialTextFilter::SpecialTextFilter(const std::vector<std::string>& texts) : texts_(texts) {
  for (const auto& t : texts_)
    if (!t.empty()) first_bytes_.set(static_cast<unsigned char>(t[0]));
}

std::string SpecialTextFilter::push(std::string_view text) {
  held_ += text;
  return drain(false);
}

std::string SpecialTextFilter::flush() {
  return drain(true);
}

std::string SpecialTextFilter::drain(bool at_end) {
  std::string out;
  size_t i = 0;
  while (i < held_.size()) {
    if (!first_bytes_.test(static_cast<unsigned char>(held_[i]))) {
      out += held_[i++];
      continue;
    }
    size_t match = 0;
    bool partial = false;
    for (const auto& t : texts_) {
      if (t.empty()) continue;
      size_t n = std::min(t.size(), held_.size() - i);
      if (held_.compare(i, n, t, 0, n) != 0) continue;
      if (n == t.size())
        match = std::max(match, n);
      else
        partial = true;
    }
    if (partial && !at_end) break;  // may be a (longer) special token's text still arriving
    if (match > 0) {
      i += match;
    } else {
      out += held_[i++];
    }
  }
  held_.erase(0, i);
  return out;
}

}  // namespace tessera::server

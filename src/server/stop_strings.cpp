#include "server/stop_strings.h"

#include <algorithm>

namespace tessera::server {

StopMatcher::Result StopMatcher::push(const std::string& piece, bool may_stop) {
  Result r;
  if (stopped_) return r;
  held_ += piece;
  if (stops_.empty() || !may_stop) {
    r.text = std::move(held_);
    held_.clear();
    return r;
  }
  // The earliest complete match wins (as if the text were scanned left to right), the longest
  // of those that start there.
  size_t first = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at != std::string::npos && (at < first || (at == first && s.size() > r.stop.size()))) first = at, r.stop = s;
  }
  if (first != std::string::npos) {
    r.text = held_.substr(0, first);
    r.stopped = stopped_ = true;
    held_.clear();
    return r;
  }
  // Hold the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  }
  r.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopMatcher::flush() {
  std::string out = stopped_ ? std::string() : std::move(held_);
  held_.clear();
  return out;
}

}  // namespace tessera::server

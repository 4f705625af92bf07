// Stop strings over streamed text. Text arrives in pieces that split anywhere (a stop string
// may span several tokens); any tail that could still become a stop string is held back and
// released as soon as it cannot.
#pragma once
#include <string>
#include <vector>

namespace tessera::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string was found; `text` ends right before it
    std::string stop;      // the one found
  };
  // may_stop false (before a request's min_tokens): the text goes out whole, matching nothing.
  Result push(const std::string& piece, bool may_stop = true);
  // End of the sequence: everything still held back.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace tessera::server

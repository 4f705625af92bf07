#include "token_ids.h"

#include <climits>
#include <sstream>
#include <stdexcept>

#include "core/error.h"

namespace tessera::app {

std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    try {
      size_t used = 0;
      long v = std::stol(word, &used);
      if (used != word.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(word);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      throw Error(flag + ": '" + word + "' is not a token id");
    }
  }
  return ids;
}

}  // namespace tessera::app

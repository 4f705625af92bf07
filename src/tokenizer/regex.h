// A compiled PCRE2 pattern (UTF + Unicode properties, JIT) shared by all threads.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::tok {

class Regex {
 public:
  // Throws tessera::Error naming `where` when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of all non-overlapping matches in `text` (valid UTF-8),
  // searching left to right like Rust's find_iter: after an empty match the search moves on
  // one character.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8
};

}  // namespace tessera::tok

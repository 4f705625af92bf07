// The "pattern" of Split, Replace and the like: {"String": literal} or {"Regex": pcre}.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.h"

namespace tessera::tok {

class Pattern {
 public:
  Pattern(const nlohmann::json& j, const std::string& where);
  // Appends the byte ranges of all non-overlapping matches, left to right.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

}  // namespace tessera::tok

// Removes the texts of special tokens from streamed content. With a parser, output is
// detokenized with special tokens kept (its markers often are special); what reaches the
// content must still read as it would without them.
#pragma once
#include <bitset>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

class SpecialTextFilter {
 public:
  // `texts` must outlive the filter.
  explicit SpecialTextFilter(const std::vector<std::string>& texts);
  // The text with every special token's text removed; a tail that may begin one is held.
  std::string push(std::string_view text);
  // The held tail, less any special token's text (the output ended).
  std::string flush();

 private:
  std::string drain(bool at_end);
  const std::vector<std::string>& texts_;
  std::bitset<256> first_bytes_;
  std::string held_;
};

}  // namespace tessera::server

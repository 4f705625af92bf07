// Added tokens (tokenizer.json "added_tokens"): matched in the text before the model runs.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/normalizer.h"

namespace tessera::tok {

struct AddedToken {
  std::string content;
  // The token's string for id_to_token and decode: the content, normalized when the token is
  // matched after normalization (the reference stores that form).
  std::string text;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

class AddedVocab {
 public:
  // Tokens with normalized=true are matched in normalized text, so their content is
  // normalized with `norm` for matching, as the reference does.
  void build(std::vector<AddedToken> tokens, const Normalizer* norm);

  struct Segment {
    size_t begin, end;
    int32_t id;  // -1: plain text to encode
  };
  // Splits `text` into plain segments and added-token matches (leftmost, longest), honouring
  // lstrip/rstrip/single_word. `normalized_set` picks the tokens matched after normalization.
  // Without `parse_special`, special tokens are left in the text as plain text.
  void split(std::string_view text, bool normalized_set, bool parse_special, std::vector<Segment>& out) const;

  const AddedToken* by_id(int32_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : &tokens_[it->second];
  }
  const AddedToken* by_content(std::string_view content) const {
    auto it = by_content_.find(std::string(content));
    return it == by_content_.end() ? nullptr : &tokens_[it->second];
  }
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  struct Trie {
    struct Node {
      int32_t token = -1;  // index into tokens_ ending here
      std::vector<std::pair<unsigned char, int32_t>> kids;
    };
    std::vector<Node> nodes;
    std::array<int32_t, 256> root{};
    bool empty = true;
    void add(std::string_view key, int32_t token);
    // Longest token starting at text[i], or -1; `end` receives its end.
    int32_t longest_at(std::string_view text, size_t i, size_t& end) const;
  };
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Trie raw_, normalized_;
};

}  // namespace tessera::tok

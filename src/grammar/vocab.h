// A model's tokens as byte strings, in a trie, for finding every token a grammar allows next.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

class Vocab {
 public:
  // token_bytes[id]: the bytes token id adds to a text; "" for tokens no grammar allows (special
  // tokens, ids with no token).
  explicit Vocab(std::vector<std::string> token_bytes);
  int size() const { return int(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  // allowed[id] = 1 for every token whose bytes m accepts, else 0 (resized to size()).
  void allowed(const Matcher& m, std::vector<uint8_t>& allowed) const;

 private:
  struct Node {
    uint32_t child_begin = 0, child_end = 0;  // into child_byte_ / child_node_
    uint32_t token_begin = 0, token_end = 0;  // into tokens_: the tokens spelled by this path
  };
  void visit(Matcher::Walk& w, uint32_t node, const Matcher::Cursor& c, std::vector<uint8_t>& out) const;

  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty string)
  std::vector<uint8_t> child_byte_;
  std::vector<uint32_t> child_node_;
  std::vector<int32_t> tokens_;
};

// What a constrained sequence is held to: a grammar, read through the model's tokens.
struct Constraint {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const Vocab> vocab;
};

}  // namespace tessera::grammar

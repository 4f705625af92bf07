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
  // allowed[id] = 1 for every token whose bytes m accepts, else 0 (resized to size()). Throws
  // tessera::Error past Matcher::Walk::kBudget.
  void allowed(const Matcher& m, std::vector<uint8_t>& allowed) const;

 private:
  // A byte trie over some of the tokens.
  struct Trie {
    struct Node {
      uint32_t child_begin = 0, child_end = 0;  // into child_byte / child_node
      uint32_t token_begin = 0, token_end = 0;  // into tokens: the tokens spelled by this path
    };
    std::vector<Node> nodes;  // nodes[0]: the root (the empty string)
    std::vector<uint8_t> child_byte;
    std::vector<uint32_t> child_node;
    std::vector<int32_t> tokens;
    Trie(const std::vector<std::string>& bytes, std::vector<int32_t> ids);
    void visit(Matcher::Walk& w, uint32_t node, const Matcher::Cursor& c, std::vector<uint8_t>& out) const;
  };
  // How many characters of plain text (no '"', '\', control bytes; valid UTF-8) the walk reads
  // from c whatever the characters, as inside a JSON string, counted (maxLength) or not: for
  // each count, every probe (each ASCII character, each byte value at each position of the UTF-8
  // forms; one of each form of g's byte classes) is read, all to the same state, or none is.
  // Returns the count where none is, kUnbounded once a character leaves the state as it was (or
  // past the longest plain token), -1 where the probes read differently. Probes suffice for
  // grammars that take characters by byte ranges, as json_schema.cpp's do.
  static constexpr int kUnbounded = 1 << 30;
  static constexpr uint32_t kMaxTextHeads = 16;  // text is read in a few ways; probing more costs
  int text_run(Matcher::Walk& w, Matcher::Cursor c, const Grammar& g) const;

  std::vector<std::string> bytes_;
  std::vector<int32_t> plain_;       // tokens of plain text, fewest characters first
  std::vector<int> plain_chars_;     // their characters
  Trie all_, rest_;                  // every token; those not plain
  std::vector<std::string> probes_;  // 'a' first
};

// The last few masks a sequence computed, by matcher state (Matcher::state_key): inside a
// string or a number the state after each token is the same, so the vocabulary is walked once
// for the whole string rather than once a token.
class MaskCache {
 public:
  // Vocab::allowed(m, out), from the cache when m's state was seen lately.
  void allowed(const Vocab& vocab, const Matcher& m, std::vector<uint8_t>& out);

 private:
  static constexpr size_t kEntries = 8;  // 16 KB each at a 128k vocabulary
  std::vector<std::pair<std::string, std::vector<uint64_t>>> entries_;  // the most recent last
};

// What a constrained sequence is held to: a grammar, read through the model's tokens.
struct Constraint {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const Vocab> vocab;
  // Reasoning models: the token sequences that open and close a reasoning block (Gemma 4's
  // open tag is <|channel> then "thought"). The grammar holds the text after the block and leaves
  // the block free: one open at the start (starts_in_reasoning) or opened by the first tokens,
  // until a close tag. An open tag's first token is one the grammar's text cannot hold (a
  // special token), so that drawing it means the tag. Empty: no reasoning block.
  std::vector<std::vector<int32_t>> reasoning_open = {}, reasoning_close = {};
  bool starts_in_reasoning = false;
};

}  // namespace tessera::grammar

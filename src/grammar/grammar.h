// Grammars that constrain generation (structured output): a context-free grammar over bytes, and
// a matcher that follows a text through it byte by byte.
//
//   Grammar g;
//   int digits = g.new_rule();
//   g.add(digits, {g.bytes(byte_range('0', '9')), Grammar::rule(digits)});
//   g.add(digits, {});                       // the empty alternative
//   g.set_root(digits);
//   g.finish();                              // checks and freezes it
//   Matcher m(std::make_shared<const Grammar>(std::move(g)));
//   m.advance("12");                         // true: "12" starts a sentence
//   m.complete();                            // true: "12" is one
//
// Bytes, not characters: tokens are byte strings, and a multi-byte character may be split
// between two tokens. A grammar that wants valid UTF-8 spells it out (json_schema.cpp does).
//
// The matcher keeps every way the text so far can be read (a set of stacks of grammar positions,
// sharing their tails), so the grammar may be ambiguous; it must not be left-recursive (finish()
// refuses it), since reading a rule must take a byte before it can reach itself again.
#pragma once
#include <array>
#include <bitset>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::grammar {

using ByteSet = std::bitset<256>;
ByteSet byte_range(unsigned lo, unsigned hi);  // [lo, hi]
ByteSet byte_set(std::string_view members);

class Grammar {
 public:
  // One symbol of an alternative: a byte from a set, or a rule.
  struct Symbol {
    bool is_rule = false;
    uint32_t index = 0;  // a byte set's or a rule's
  };

  int new_rule();
  // A new rule of these alternatives.
  int new_rule(std::vector<std::vector<Symbol>> alternatives);
  // Adds an alternative, a sequence of symbols (empty: the empty string), to rule.
  void add(int rule, std::vector<Symbol> seq);
  Symbol bytes(const ByteSet& set);
  static Symbol rule(int id) { return {true, uint32_t(id)}; }
  // The bytes of s, one symbol each.
  std::vector<Symbol> literal(std::string_view s);
  // x between min and max (none: no limit) times, through new rules.
  std::vector<Symbol> repeat(Symbol x, uint32_t min, std::optional<uint32_t> max);
  void set_root(int rule) { root_ = rule; }
  // Checks that every rule has an alternative and none is left-recursive (throws
  // tessera::Error), and lays the rules out for the matcher. No rule may be added after.
  void finish();
  int num_rules() const { return int(rules_.size()); }

  // The laid-out form: each alternative's symbols one after another, then an End. A rule whose
  // alternatives all start with a byte, no byte in two of them (a character of a JSON string:
  // plain, escape, each UTF-8 length), also has a Choice element: one stack top that picks the
  // alternative by the byte read, where the rule's alternatives would be one top each.
  enum class Kind : uint8_t { End, Bytes, Rule, Choice };
  struct Element {
    Kind kind;
    uint32_t index;  // Bytes: a set; Rule: a rule; Choice: a choice table
  };
  static constexpr uint32_t kNoAlternative = ~0u;
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return starts_[rule]; }
  const ByteSet& set(uint32_t index) const { return sets_[index]; }
  uint32_t root() const { return uint32_t(root_); }
  // The position of rule's Choice element, or kNoAlternative when it has none.
  uint32_t choice_of(uint32_t rule) const { return choice_pos_[rule]; }
  // Where the alternative of Choice table c that starts with byte b begins (at that byte's
  // element), or kNoAlternative.
  uint32_t choose(uint32_t c, uint8_t b) const { return choices_[c][b]; }
  // Bytes the grammar cannot tell apart (in every set, or in none; the same alternative in every
  // Choice) share a class: texts of the same classes, byte for byte, read alike.
  uint8_t byte_class(uint8_t b) const { return classes_[b]; }

 private:
  std::vector<std::vector<std::vector<Symbol>>> rules_;
  std::vector<ByteSet> sets_;
  std::vector<Element> elements_;
  std::vector<std::vector<uint32_t>> starts_;  // per rule, where each alternative begins
  std::vector<uint32_t> choice_pos_;            // per rule
  std::vector<std::array<uint32_t, 256>> choices_;
  std::array<uint8_t, 256> classes_{};
  int root_ = -1;
  bool finished_ = false;
};

// A grammar whose sentences are exactly the given texts (a choice among labels); throws
// tessera::Error on an empty list.
std::shared_ptr<const Grammar> choice_grammar(const std::vector<std::string>& texts);

// A stack entry: the grammar element to read next, and the entry below it (-1: the bottom).
struct Node {
  uint32_t pos;
  int32_t below;
};

// Where a text stands in a grammar. Cheap to copy (a few small vectors).
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> g);

  // Reads bytes: true when the text so far, plus them, still starts a sentence of the grammar;
  // otherwise false, and the matcher is unchanged. Reading (also accepts()) throws
  // tessera::Error past Walk::kBudget.
  bool advance(std::string_view bytes);
  // Whether advance(bytes) would succeed, without reading them.
  bool accepts(std::string_view bytes) const;
  // The text so far is a whole sentence.
  bool complete() const { return complete_; }
  // Some byte may still follow.
  bool can_continue() const { return !heads_.empty(); }
  // The ways the text so far can be read (stacks).
  size_t num_heads() const { return heads_.size(); }
  const Grammar& grammar() const { return *g_; }
  // Equal for matchers in the same state (the same stacks, position for position), whatever
  // text led there: inside a string or a number each token leaves the state as it was.
  std::string state_key() const;

  // Reads paths of bytes from this state, for walking a tree of byte strings (vocab_trie.h): a
  // Cursor holds the state after a path; step() returns the state one byte further. Nodes are
  // appended to a scratch arena that a walk rewinds with mark()/rewind().
  struct Cursor {
    uint32_t first = 0, last = 0;  // its heads: the walk's heads[first, last)
    bool complete = false;
    bool alive() const { return first != last || complete; }
  };
  class Walk {
   public:
    explicit Walk(const Matcher& m);
    Cursor start() const { return start_; }
    Cursor step(const Cursor& c, uint8_t byte);
    // The cursor after `bytes` from c (or the start); none when they leave the grammar.
    std::optional<Cursor> read(const Cursor& c, std::string_view bytes);
    std::optional<Cursor> read(std::string_view bytes) { return read(start_, bytes); }
    // Matcher::state_key() of a matcher standing at c.
    std::string state_key(const Cursor& c) const;
    std::pair<size_t, size_t> mark() const { return {nodes_.size(), heads_.size()}; }
    void rewind(std::pair<size_t, size_t> m) { nodes_.resize(m.first), heads_.resize(m.second); }

   private:
    friend class Matcher;
    const Grammar& g_;
    std::vector<Node> nodes_;
    std::vector<int32_t> heads_;
    Cursor start_;
    uint64_t work_ = 0;  // stack entries stepped and made, against kBudget
  };
  // What one walk may do (stack entries stepped through and made) before it gives up, throwing
  // tessera::Error (the grammar is too ambiguous to follow), so that no grammar holds the engine
  // for long: a JSON string's mask at a 128k vocabulary takes ~2M; 30M is about a second.
  static constexpr uint64_t kBudget = 30'000'000;

 private:
  friend class Walk;
  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;  // stack entries: a grammar position and the entry below
  std::vector<int32_t> heads_;      // the stacks' tops, each at a Bytes element
  bool complete_ = false;
};

}  // namespace tessera::grammar

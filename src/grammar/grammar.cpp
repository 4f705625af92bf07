#include "grammar/grammar.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace tessera::grammar {

ByteSet byte_range(unsigned lo, unsigned hi) {
  ByteSet s;
  for (unsigned b = lo; b <= hi && b < 256; ++b) s.set(b);
  return s;
}

ByteSet byte_set(std::string_view members) {
  ByteSet s;
  for (char c : members) s.set(uint8_t(c));
  return s;
}

int Grammar::new_rule() {
  TESSERA_CHECK(!finished_, "grammar: a rule added after finish()");
  rules_.emplace_back();
  return int(rules_.size()) - 1;
}

int Grammar::new_rule(std::vector<std::vector<Symbol>> alternatives) {
  const int r = new_rule();
  for (auto& a : alternatives) add(r, std::move(a));
  return r;
}

void Grammar::add(int rule, std::vector<Symbol> seq) {
  TESSERA_CHECK(!finished_ && rule >= 0 && rule < num_rules(), "grammar: an alternative for no rule");
  rules_[size_t(rule)].push_back(std::move(seq));
}

Grammar::Symbol Grammar::bytes(const ByteSet& set) {
  auto it = std::find(sets_.begin(), sets_.end(), set);
  if (it == sets_.end()) it = sets_.insert(sets_.end(), set);
  return {false, uint32_t(it - sets_.begin())};
}

std::vector<Grammar::Symbol> Grammar::literal(std::string_view s) {
  std::vector<Symbol> out;
  for (char c : s) out.push_back(bytes(byte_set(std::string_view(&c, 1))));
  return out;
}

std::vector<Grammar::Symbol> Grammar::repeat(Symbol x, uint32_t min, std::optional<uint32_t> max) {
  std::vector<Symbol> out(min, x);
  if (!max) {
    const int star = new_rule();  // star ::= "" | x star
    add(star, {});
    add(star, {x, rule(star)});
    out.push_back(rule(star));
  } else if (*max > min) {
    int opt = new_rule({{}, {x}});  // up to max - min more, nested: "" | x ("" | x (...))
    for (uint32_t k = 1; k < *max - min; ++k) opt = new_rule({{}, {x, rule(opt)}});
    out.push_back(rule(opt));
  }
  return out;
}

void Grammar::finish() {
  TESSERA_CHECK(!finished_, "grammar: finish() called twice");
  TESSERA_CHECK(root_ >= 0 && root_ < num_rules(), "grammar: no root rule");
  const size_t n = rules_.size();
  for (size_t r = 0; r < n; ++r) {
    TESSERA_CHECK(!rules_[r].empty(), "grammar: rule " + std::to_string(r) + " has no alternative");
    for (const auto& alt : rules_[r])
      for (const Symbol& s : alt)
        TESSERA_CHECK(s.is_rule ? s.index < n : s.index < sets_.size(), "grammar: a symbol names nothing");
  }
  // Which rules can match the empty string (to a fixed point).
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      if (!nullable[r])
        for (const auto& alt : rules_[r])
          if (std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) { return s.is_rule && nullable[s.index]; })) {
            nullable[r] = changed = true;
            break;
          }
  }
  // Left recursion: a rule reaching itself through the rules each alternative can start with.
  std::vector<int> state(n, 0);  // 0 unvisited, 1 on the path, 2 done
  auto visit = [&](auto&& self, size_t r) -> void {
    state[r] = 1;
    for (const auto& alt : rules_[r])
      for (const Symbol& s : alt) {
        if (!s.is_rule) break;
        TESSERA_CHECK(state[s.index] != 1, "grammar: rule " + std::to_string(s.index) + " is left-recursive");
        if (state[s.index] == 0) self(self, s.index);
        if (!nullable[s.index]) break;
      }
    state[r] = 2;
  };
  for (size_t r = 0; r < n; ++r)
    if (state[r] == 0) visit(visit, r);

  starts_.assign(n, {});
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r]) {
      starts_[r].push_back(uint32_t(elements_.size()));
      for (const Symbol& s : alt) elements_.push_back({s.is_rule ? Kind::Rule : Kind::Bytes, s.index});
      elements_.push_back({Kind::End, 0});
    }
  // Choice elements, after every alternative.
  choice_pos_.assign(n, kNoAlternative);
  for (size_t r = 0; r < n; ++r) {
    const auto& alts = rules_[r];
    if (alts.size() < 2) continue;
    ByteSet seen;
    bool disjoint = true;
    for (const auto& alt : alts) {
      disjoint = disjoint && !alt.empty() && !alt[0].is_rule && (seen & sets_[alt[0].index]).none();
      if (!disjoint) break;
      seen |= sets_[alt[0].index];
    }
    if (!disjoint) continue;
    std::array<uint32_t, 256> table;
    table.fill(kNoAlternative);
    for (size_t a = 0; a < alts.size(); ++a)
      for (unsigned b = 0; b < 256; ++b)
        if (sets_[alts[a][0].index].test(b)) table[b] = starts_[r][a];
    choice_pos_[r] = uint32_t(elements_.size());
    elements_.push_back({Kind::Choice, uint32_t(choices_.size())});
    elements_.push_back({Kind::End, 0});
    choices_.push_back(table);
  }
  // Byte classes: the partition of the bytes refined by each set and each Choice table (the
  // only ways the matcher looks at a byte), classes numbered by their first byte.
  classes_.fill(0);
  for (const ByteSet& set : sets_) {
    std::array<int, 512> next;  // (class, in the set) -> new class
    next.fill(-1);
    int n = 0;
    for (unsigned b = 0; b < 256; ++b) {
      int& c = next[size_t(classes_[b]) * 2 + set.test(b)];
      if (c < 0) c = n++;
      classes_[b] = uint8_t(c);
    }
  }
  for (const auto& table : choices_) {
    std::vector<std::pair<std::pair<uint8_t, uint32_t>, uint8_t>> next;  // (class, alternative) -> new class
    for (unsigned b = 0; b < 256; ++b) {
      const std::pair<uint8_t, uint32_t> k{classes_[b], table[b]};
      auto it = std::find_if(next.begin(), next.end(), [&](const auto& e) { return e.first == k; });
      if (it == next.end()) it = next.insert(next.end(), {k, uint8_t(next.size())});
      classes_[b] = it->second;
    }
  }
  rules_.clear();
  finished_ = true;
}

std::shared_ptr<const Grammar> choice_grammar(const std::vector<std::string>& texts) {
  TESSERA_CHECK(!texts.empty(), "grammar: a choice among no texts");
  Grammar g;
  std::vector<std::vector<Grammar::Symbol>> alternatives;
  for (const auto& t : texts) alternatives.push_back(g.literal(t));
  g.set_root(g.new_rule(std::move(alternatives)));
  g.finish();
  return std::make_shared<const Grammar>(std::move(g));
}

namespace {

using Kind = Grammar::Kind;

constexpr size_t kKeepDuplicates = 16;

// Pushes onto heads the tops of every stack that entry n (any element) leads to; reaching the
// bottom sets complete. A rule's continuation is left off the stack when it would only end an
// alternative (so a right-recursive rule, a repetition, keeps the stack flat).
void expand(const Grammar& g, std::vector<Node>& nodes, int32_t n, std::vector<int32_t>& heads, bool& complete) {
  const auto& el = g.elements();
  for (;;) {
    if (n < 0) {
      complete = true;
      return;
    }
    const Node node = nodes[size_t(n)];  // a copy: pushes below may move the arena
    const Grammar::Element e = el[node.pos];
    if (e.kind == Kind::Bytes || e.kind == Kind::Choice) {
      heads.push_back(n);
      return;
    }
    if (e.kind == Kind::End) {
      n = node.below;
      continue;
    }
    int32_t cont = node.below;
    if (el[node.pos + 1].kind != Kind::End) {
      nodes.push_back({node.pos + 1, node.below});
      cont = int32_t(nodes.size()) - 1;
    }
    if (const uint32_t choice = g.choice_of(e.index); choice != Grammar::kNoAlternative) {
      nodes.push_back({choice, cont});
      heads.push_back(int32_t(nodes.size()) - 1);
      return;
    }
    for (uint32_t start : g.alternatives(e.index)) {
      if (el[start].kind == Kind::End) {
        expand(g, nodes, cont, heads, complete);
      } else {
        nodes.push_back({start, cont});
        expand(g, nodes, int32_t(nodes.size()) - 1, heads, complete);
      }
    }
    return;
  }
}

// Appends to heads the tops after reading byte b from the stacks heads[first, last); returns
// whether the text is then complete. Stacks equal entry for entry are kept once.
bool step(const Grammar& g, std::vector<Node>& nodes, std::vector<int32_t>& heads, uint32_t first, uint32_t last,
          uint8_t b) {
  const auto& el = g.elements();
  const size_t begin = heads.size();
  bool complete = false;
  for (uint32_t i = first; i < last; ++i) {
    Node node = nodes[size_t(heads[i])];
    if (el[node.pos].kind == Kind::Choice) {  // the alternative starting with b, at that byte
      node.pos = g.choose(el[node.pos].index, b);
      if (node.pos == Grammar::kNoAlternative) continue;
    } else if (!g.set(el[node.pos].index).test(b)) {
      continue;
    }
    if (el[node.pos + 1].kind == Kind::End) {
      expand(g, nodes, node.below, heads, complete);
    } else {
      nodes.push_back({node.pos + 1, node.below});
      expand(g, nodes, int32_t(nodes.size()) - 1, heads, complete);
    }
  }
  // Duplicate stacks (equal entry for entry) only cost time, so a few are left; past that they
  // are removed, so an ambiguous grammar (a pattern searched for in a string) cannot multiply
  // its stacks.
  if (heads.size() - begin <= kKeepDuplicates) return complete;
  auto same = [&](int32_t a, int32_t c) {  // entry for entry, down to a shared entry or the bottom
    while (a != c) {
      if (a < 0 || c < 0 || nodes[size_t(a)].pos != nodes[size_t(c)].pos) return false;
      a = nodes[size_t(a)].below, c = nodes[size_t(c)].below;
    }
    return true;
  };
  // By a hash of each stack's positions, so that only equal hashes are compared in full.
  std::vector<std::pair<uint64_t, int32_t>> keyed;
  for (size_t i = begin; i < heads.size(); ++i) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t n = heads[i]; n >= 0; n = nodes[size_t(n)].below) h = (h ^ nodes[size_t(n)].pos) * 1099511628211ull;
    keyed.emplace_back(h, heads[i]);
  }
  std::sort(keyed.begin(), keyed.end());
  heads.resize(begin);
  for (size_t i = 0; i < keyed.size(); ++i) {
    bool dup = false;
    for (size_t j = i; j-- > 0 && keyed[j].first == keyed[i].first && !dup;) dup = same(keyed[i].second, keyed[j].second);
    if (!dup) heads.push_back(keyed[i].second);
  }
  return complete;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  TESSERA_CHECK(g_ && !g_->elements().empty(), "grammar: a matcher needs a finished grammar");
  // The root as if named by a rule element: the alternatives of the root over the bottom.
  for (uint32_t start : g_->alternatives(g_->root())) {
    if (g_->elements()[start].kind == Kind::End) {
      complete_ = true;
      continue;
    }
    nodes_.push_back({start, -1});
    expand(*g_, nodes_, int32_t(nodes_.size()) - 1, heads_, complete_);
  }
}

bool Matcher::advance(std::string_view bytes) {
  if (bytes.empty()) return true;
  Walk w(*this);
  const std::optional<Cursor> read = w.read(bytes);
  if (!read) return false;
  const Cursor c = *read;
  // Keep only the entries the new stacks use, renumbered.
  std::vector<int32_t> renum(w.nodes_.size(), -1);
  std::vector<Node> kept;
  std::vector<int32_t> chain;
  auto keep = [&](int32_t head) {
    chain.clear();
    for (int32_t n = head; n >= 0 && renum[size_t(n)] < 0; n = w.nodes_[size_t(n)].below) chain.push_back(n);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Node& old = w.nodes_[size_t(*it)];
      kept.push_back({old.pos, old.below < 0 ? -1 : renum[size_t(old.below)]});
      renum[size_t(*it)] = int32_t(kept.size()) - 1;
    }
    return renum[size_t(head)];
  };
  std::vector<int32_t> heads;
  for (uint32_t i = c.first; i < c.last; ++i) heads.push_back(keep(w.heads_[i]));
  nodes_ = std::move(kept);
  heads_ = std::move(heads);
  complete_ = c.complete;
  return true;
}

bool Matcher::accepts(std::string_view bytes) const {
  if (bytes.empty()) return true;
  Walk w(*this);
  return w.read(bytes).has_value();
}

namespace {

// The stacks with tops heads[first, last), position by position, sorted; and whether complete.
std::string stacks_key(const std::vector<Node>& nodes, const std::vector<int32_t>& heads, uint32_t first,
                       uint32_t last, bool complete) {
  std::vector<std::string> stacks;
  for (uint32_t i = first; i < last; ++i) {
    std::string k;
    for (int32_t n = heads[i]; n >= 0; n = nodes[size_t(n)].below)
      k.append(reinterpret_cast<const char*>(&nodes[size_t(n)].pos), 4);
    stacks.push_back(std::move(k));
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key(1, complete ? 'c' : 'o');
  for (const auto& k : stacks) key += std::to_string(k.size()) + ":" + k;
  return key;
}

}  // namespace

std::string Matcher::state_key() const { return stacks_key(nodes_, heads_, 0, uint32_t(heads_.size()), complete_); }

Matcher::Walk::Walk(const Matcher& m) : g_(*m.g_), nodes_(m.nodes_), heads_(m.heads_) {
  start_ = {0, uint32_t(heads_.size()), m.complete_};
}

std::string Matcher::Walk::state_key(const Cursor& c) const {
  return stacks_key(nodes_, heads_, c.first, c.last, c.complete);
}

std::optional<Matcher::Cursor> Matcher::Walk::read(const Cursor& from, std::string_view bytes) {
  Cursor c = from;
  for (char ch : bytes) {
    if (c.first == c.last) return std::nullopt;
    c = step(c, uint8_t(ch));
    if (!c.alive()) return std::nullopt;
  }
  return c;
}

Matcher::Cursor Matcher::Walk::step(const Cursor& c, uint8_t byte) {
  const uint32_t first = uint32_t(heads_.size());
  const size_t made = nodes_.size();
  const bool complete = grammar::step(g_, nodes_, heads_, c.first, c.last, byte);
  work_ += (c.last - c.first) + (nodes_.size() - made);
  TESSERA_CHECK(work_ <= kBudget, "grammar: too ambiguous to follow (the text so far can be read in too many ways at "
                                  "once); simplify the grammar or pattern");
  return {first, uint32_t(heads_.size()), complete};
}

}  // namespace tessera::grammar

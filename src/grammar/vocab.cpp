#include "grammar/vocab.h"

#include <algorithm>
#include <numeric>

#include "grammar/code_points.h"

namespace tessera::grammar {


Vocab::Trie::Trie(const std::vector<std::string>& bytes, std::vector<int32_t> order) {
  // Tokens in byte order: a new child is then always its parent's last.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes[size_t(a)] < bytes[size_t(b)]; });
  struct Build {
    std::vector<std::pair<uint8_t, uint32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Build> build(1);
  for (int32_t id : order) {
    uint32_t n = 0;
    for (char ch : bytes[size_t(id)]) {
      const uint8_t b = uint8_t(ch);
      if (build[n].children.empty() || build[n].children.back().first != b) {
        build.emplace_back();
        build[n].children.emplace_back(b, uint32_t(build.size() - 1));
      }
      n = build[n].children.back().second;
    }
    build[n].tokens.push_back(id);
  }
  nodes.resize(build.size());
  for (size_t n = 0; n < build.size(); ++n) {
    Node& out = nodes[n];
    out.child_begin = uint32_t(child_byte.size());
    for (auto [b, c] : build[n].children) child_byte.push_back(b), child_node.push_back(c);
    out.child_end = uint32_t(child_byte.size());
    out.token_begin = uint32_t(tokens.size());
    tokens.insert(tokens.end(), build[n].tokens.begin(), build[n].tokens.end());
    out.token_end = uint32_t(tokens.size());
  }
}

void Vocab::Trie::visit(Matcher::Walk& w, uint32_t node, const Matcher::Cursor& c, std::vector<uint8_t>& out) const {
  const Node& n = nodes[node];
  for (uint32_t k = n.child_begin; k < n.child_end; ++k) {
    const auto mark = w.mark();
    const Matcher::Cursor next = w.step(c, child_byte[k]);
    if (next.alive()) {
      const Node& child = nodes[child_node[k]];
      for (uint32_t t = child.token_begin; t < child.token_end; ++t) out[size_t(tokens[t])] = 1;
      if (next.first != next.last) visit(w, child_node[k], next, out);
    }
    w.rewind(mark);
  }
}

namespace {

// The ids of the tokens with bytes that `keep` takes.
template <class F>
std::vector<int32_t> ids_where(const std::vector<std::string>& bytes, F keep) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < bytes.size(); ++id)
    if (!bytes[id].empty() && keep(bytes[id])) out.push_back(int32_t(id));
  return out;
}

}  // namespace

Vocab::Vocab(std::vector<std::string> token_bytes)
    : bytes_(std::move(token_bytes)),
      plain_(ids_where(bytes_, plain_text)),
      all_(bytes_, ids_where(bytes_, [](const std::string&) { return true; })),
      rest_(bytes_, ids_where(bytes_, [](const std::string& b) { return !plain_text(b); })) {
  // Plain tokens by characters (bytes that do not continue a UTF-8 form), counted once each.
  std::vector<std::pair<int, int32_t>> by_chars;
  for (int32_t id : plain_) {
    const std::string& b = bytes_[size_t(id)];
    by_chars.emplace_back(int(std::count_if(b.begin(), b.end(), [](char ch) { return (uint8_t(ch) & 0xC0) != 0x80; })), id);
  }
  std::sort(by_chars.begin(), by_chars.end());
  for (size_t i = 0; i < by_chars.size(); ++i) plain_chars_.push_back(by_chars[i].first), plain_[i] = by_chars[i].second;
  auto add = [&](std::initializer_list<unsigned> b) {
    std::string s;
    for (unsigned x : b) s += char(x);
    probes_.push_back(s);
  };
  add({'a'});  // first: it fails at once outside text
  for (unsigned b = 0x20; b < 0x80; ++b)
    if (b != '"' && b != '\\') add({b});
  for (unsigned c = 0x80; c <= 0xBF; ++c) {
    add({0xC3, c}), add({0xE1, c, 0x80}), add({0xE1, 0x80, c}), add({0xF1, c, 0x80, 0x80}), add({0xF1, 0x80, c, 0x80}),
        add({0xF1, 0x80, 0x80, c});
  }
  for (unsigned lead = 0xC2; lead <= 0xF4; ++lead) {
    if (lead <= 0xDF) add({lead, 0x80}), add({lead, 0xBF});
    else if (lead == 0xE0) add({lead, 0xA0, 0x80}), add({lead, 0xBF, 0xBF});
    else if (lead == 0xED) add({lead, 0x80, 0x80}), add({lead, 0x9F, 0xBF});
    else if (lead <= 0xEF) add({lead, 0x80, 0x80}), add({lead, 0xBF, 0xBF});
    else if (lead == 0xF0) add({lead, 0x90, 0x80, 0x80}), add({lead, 0xBF, 0xBF, 0xBF});
    else if (lead == 0xF4) add({lead, 0x80, 0x80, 0x80}), add({lead, 0x8F, 0xBF, 0xBF});
    else add({lead, 0x80, 0x80, 0x80}), add({lead, 0xBF, 0xBF, 0xBF});
  }
}

int Vocab::text_run(Matcher::Walk& w, Matcher::Cursor c, const Grammar& g) const {
  // The probes g reads differently: one of each sequence of byte classes.
  std::vector<const std::string*> probes;
  std::vector<uint64_t> seen;
  for (const std::string& p : probes_) {
    uint64_t form = p.size();  // up to 4 bytes: 40 bits
    for (char ch : p) form = form * 256 + g.byte_class(uint8_t(ch));
    if (std::find(seen.begin(), seen.end(), form) == seen.end()) seen.push_back(form), probes.push_back(&p);
  }
  std::string key = w.state_key(c);
  for (int k = 0; k < plain_chars_.back(); ++k) {  // c: after k characters
    bool read = false;
    std::string next_key;
    for (size_t i = 0; i < probes.size(); ++i) {
      const auto mark = w.mark();
      const std::optional<Matcher::Cursor> after = w.read(c, *probes[i]);
      if (after && after->last - after->first > kMaxTextHeads) return -1;
      std::string after_key = after ? w.state_key(*after) : std::string();
      w.rewind(mark);
      if (i == 0) read = after.has_value(), next_key = std::move(after_key);
      else if (after.has_value() != read || after_key != next_key) return -1;
    }
    if (!read) return k;  // no character follows: a count's end
    if (next_key == key) return kUnbounded;
    c = *w.read(c, *probes.front());  // kept in the walk's arena
    key = std::move(next_key);
  }
  return kUnbounded;
}

void Vocab::allowed(const Matcher& m, std::vector<uint8_t>& out) const {
  out.assign(bytes_.size(), 0);
  Matcher::Walk w(m);
  const Matcher::Cursor start = w.start();
  if (start.first == start.last) return;
  // In text every plain token of up to the run's characters is allowed, and only the others need
  // the walk.
  const int run = plain_.empty() || m.num_heads() > kMaxTextHeads ? -1 : text_run(w, start, m.grammar());
  if (run >= 0) {
    for (size_t i = 0; i < plain_.size() && plain_chars_[i] <= run; ++i) out[size_t(plain_[i])] = 1;
    rest_.visit(w, 0, start, out);
  } else {
    all_.visit(w, 0, start, out);
  }
}

void MaskCache::allowed(const Vocab& vocab, const Matcher& m, std::vector<uint8_t>& out) {
  std::string key = m.state_key();
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == key; });
  if (it != entries_.end()) {
    std::rotate(it, it + 1, entries_.end());  // now the most recent
    const auto& bits = entries_.back().second;
    out.resize(size_t(vocab.size()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(bits[i / 64] >> (i % 64) & 1);
    return;
  }
  vocab.allowed(m, out);
  std::vector<uint64_t> bits((out.size() + 63) / 64, 0);
  for (size_t i = 0; i < out.size(); ++i) bits[i / 64] |= uint64_t(out[i]) << (i % 64);
  if (entries_.size() == kEntries) entries_.erase(entries_.begin());
  entries_.emplace_back(std::move(key), std::move(bits));
}

}  // namespace tessera::grammar

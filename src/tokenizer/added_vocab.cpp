#include "tokenizer/added_vocab.h"

#include "tokenizer/unicode.h"

namespace tessera::tok {

void AddedVocab::Trie::add(std::string_view key, int32_t token) {
  if (key.empty()) return;
  if (empty) {
    root.fill(-1);
    nodes.clear();
    empty = false;
  }
  auto child = [&](int32_t node, unsigned char c) -> int32_t {
    if (node < 0) {
      if (root[c] < 0) {
        root[c] = int32_t(nodes.size());
        nodes.emplace_back();
      }
      return root[c];
    }
    for (auto& [k, v] : nodes[node].kids)
      if (k == c) return v;
    int32_t n = int32_t(nodes.size());
    nodes.emplace_back();
    nodes[node].kids.emplace_back(c, n);
    return n;
  };
  int32_t node = -1;
  for (unsigned char c : key) node = child(node, c);
  // The first token registered for a content wins, like a set of patterns.
  if (nodes[node].token < 0) nodes[node].token = token;
}

int32_t AddedVocab::Trie::longest_at(std::string_view text, size_t i, size_t& end) const {
  int32_t node = root[(unsigned char)text[i]];
  int32_t best = -1;
  for (size_t k = i + 1; node >= 0; ++k) {
    if (nodes[node].token >= 0) {
      best = nodes[node].token;
      end = k;
    }
    if (k >= text.size()) break;
    int32_t next = -1;
    for (auto& [c, v] : nodes[node].kids)
      if (c == (unsigned char)text[k]) {
        next = v;
        break;
      }
    node = next;
  }
  return best;
}

void AddedVocab::build(std::vector<AddedToken> tokens, const Normalizer* norm) {
  tokens_ = std::move(tokens);
  by_id_.clear();
  by_content_.clear();
  raw_ = Trie{};
  normalized_ = Trie{};
  for (size_t i = 0; i < tokens_.size(); ++i) {
    auto& t = tokens_[i];
    t.text = t.content;
    if (t.normalized && norm) norm->normalize(t.text);
    by_id_[t.id] = i;
    by_content_.emplace(t.content, i);
    by_content_.emplace(t.text, i);
    if (t.normalized) normalized_.add(t.text, int32_t(i));
    else raw_.add(t.content, int32_t(i));
  }
}

namespace {

char32_t last_char(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  char32_t cp;
  utf8_decode(s, i, cp);
  return cp;
}

size_t trim_end_len(std::string_view s) {
  while (!s.empty() && is_whitespace(last_char(s))) {
    size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    s = s.substr(0, i);
  }
  return s.size();
}

size_t leading_ws_len(std::string_view s) {
  size_t i = 0;
  char32_t cp;
  while (i < s.size()) {
    int n = utf8_decode(s, i, cp);
    if (!is_whitespace(cp)) break;
    i += n;
  }
  return i;
}

}  // namespace

void AddedVocab::split(std::string_view text, bool normalized_set, bool parse_special, std::vector<Segment>& out) const {
  const Trie& trie = normalized_set ? normalized_ : raw_;
  size_t start_offset = 0;
  if (!trie.empty) {
    for (size_t i = 0; i < text.size();) {
      if (trie.root[(unsigned char)text[i]] < 0) {
        ++i;
        continue;
      }
      size_t stop = 0;
      int32_t ti = trie.longest_at(text, i, stop);
      if (ti < 0) {
        ++i;
        continue;
      }
      size_t start = i;
      i = stop;  // the search resumes after this match whether or not it is used
      const AddedToken& t = tokens_[ti];
      if (t.special && !parse_special) continue;
      if (t.single_word) {
        // Word chars as the reference's \w regexes see them.
        bool start_ok = start == 0 || !is_word_char(last_char(text.substr(0, start)));
        char32_t next = 0;
        if (stop < text.size()) utf8_decode(text, stop, next);
        bool stop_ok = stop == text.size() || !is_word_char(next);
        if (!start_ok || !stop_ok) continue;
      }
      if (t.lstrip) start = std::max(trim_end_len(text.substr(0, start)), start_offset);
      if (t.rstrip) {
        stop += leading_ws_len(text.substr(stop));
        i = stop;
      }
      if (start > start_offset) out.push_back({start_offset, start, -1});
      out.push_back({start, stop, t.id});
      start_offset = stop;
    }
  }
  if (start_offset < text.size() || text.empty()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace tessera::tok

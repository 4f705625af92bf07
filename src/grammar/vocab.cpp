#include "grammar/vocab.h"

#include <algorithm>
#include <numeric>

namespace tessera::grammar {

Vocab::Vocab(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  // Tokens in byte order: each node's subtree is then a run of them, and a depth-first layout
  // falls out of one pass that keeps the current path.
  std::vector<int32_t> order(bytes_.size());
  std::iota(order.begin(), order.end(), 0);
  std::erase_if(order, [&](int32_t id) { return bytes_[size_t(id)].empty(); });
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });

  // Build with per-node child lists first, then flatten.
  struct Build {
    std::vector<std::pair<uint8_t, uint32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Build> build(1);
  for (int32_t id : order) {
    uint32_t n = 0;
    for (char ch : bytes_[size_t(id)]) {
      const uint8_t b = uint8_t(ch);
      auto& kids = build[n].children;
      if (kids.empty() || kids.back().first != b) {  // sorted input: a new child is always the last
        build.emplace_back();
        build[n].children.emplace_back(b, uint32_t(build.size() - 1));
      }
      n = build[n].children.back().second;
    }
    build[n].tokens.push_back(id);
  }
  nodes_.resize(build.size());
  for (size_t n = 0; n < build.size(); ++n) {
    Node& out = nodes_[n];
    out.child_begin = uint32_t(child_byte_.size());
    for (auto [b, c] : build[n].children) child_byte_.push_back(b), child_node_.push_back(c);
    out.child_end = uint32_t(child_byte_.size());
    out.token_begin = uint32_t(tokens_.size());
    tokens_.insert(tokens_.end(), build[n].tokens.begin(), build[n].tokens.end());
    out.token_end = uint32_t(tokens_.size());
  }
}

void Vocab::allowed(const Matcher& m, std::vector<uint8_t>& out) const {
  out.assign(bytes_.size(), 0);
  Matcher::Walk w(m);
  const Matcher::Cursor start = w.start();
  if (start.first != start.last) visit(w, 0, start, out);
}

void Vocab::visit(Matcher::Walk& w, uint32_t node, const Matcher::Cursor& c, std::vector<uint8_t>& out) const {
  const Node& n = nodes_[node];
  for (uint32_t k = n.child_begin; k < n.child_end; ++k) {
    const auto mark = w.mark();
    const Matcher::Cursor next = w.step(c, child_byte_[k]);
    if (next.alive()) {
      const Node& child = nodes_[child_node_[k]];
      for (uint32_t t = child.token_begin; t < child.token_end; ++t) out[size_t(tokens_[t])] = 1;
      if (next.first != next.last) visit(w, child_node_[k], next, out);
    }
    w.rewind(mark);
  }
}

}  // namespace tessera::grammar

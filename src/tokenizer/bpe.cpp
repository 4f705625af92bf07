#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <future>
#include <thread>
#include <cstdio>
#include <functional>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/unicode.h"

namespace tessera::tok {

namespace {

// Per-thread cache of encoded words, one per model instance: lock-free for concurrent encodes.
// Direct-mapped; an entry is one cache line holding the word and its ids.
struct WordCache {
  static constexpr size_t kSlots = 1 << 14;
  static constexpr size_t kMaxWord = 22, kMaxIds = 8;
  struct alignas(64) Entry {
    uint64_t hash = 0;  // 0: empty
    uint8_t len = 0, n_ids = 0;
    char key[kMaxWord];
    int32_t ids[kMaxIds];
  };
  std::vector<Entry> slots{kSlots};
};

WordCache& cache_for(uint64_t instance) {
  thread_local std::unordered_map<uint64_t, std::unique_ptr<WordCache>> caches;
  thread_local uint64_t last_instance = 0;
  thread_local WordCache* last = nullptr;
  if (instance == last_instance) return *last;
  auto it = caches.find(instance);
  if (it == caches.end()) {
    if (caches.size() >= 8) caches.clear();  // drops caches of models that are gone
    it = caches.emplace(instance, std::make_unique<WordCache>()).first;
  }
  last_instance = instance;
  last = it->second.get();
  return *last;
}

}  // namespace

namespace {

// Runs f(begin, end) over [0, n) split across a few threads (loading only: encode is single-threaded).
template <class F>
void parallel_ranges(size_t n, F&& f) {
  size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
  if (n < 65536) threads = 1;
  std::vector<std::future<void>> jobs;
  for (size_t t = 1; t < threads; ++t) jobs.push_back(std::async(std::launch::async, f, n * t / threads, n * (t + 1) / threads));
  f(size_t(0), n / threads);
  for (auto& j : jobs) j.get();  // rethrows a worker's exception
}

}  // namespace

std::vector<MergeText> parse_merges(JsonScanner& js, std::deque<std::string>& owned) {
  std::vector<MergeText> out;
  out.reserve(js.remaining() / 16);  // a merge takes 10+ bytes of JSON; untouched capacity stays virtual
  std::string buf;
  auto str = [&]() -> std::string_view {
    std::string_view v = js.string(buf);
    return v.data() == buf.data() ? std::string_view(owned.emplace_back(v)) : v;
  };
  js.array([&] {
    if (js.peek() == '"') {
      std::string_view m = str();
      size_t sp = m.find(' ');
      if (sp == std::string_view::npos) js.fail("merge '" + std::string(m) + "' has no space");
      out.push_back({m.substr(0, sp), m.substr(sp + 1)});
    } else {
      js.expect('[');
      std::string_view a = str();
      js.expect(',');
      std::string_view b = str();
      js.expect(']');
      out.push_back({a, b});
    }
  });
  return out;
}

void BpeModel::build(BpeOptions opt, const std::vector<MergeText>& merges, const std::string& where) {
  opt_ = std::move(opt);
  plain_symbols_ = opt_.continuing_subword_prefix.empty() && opt_.end_of_word_suffix.empty();
  if (!opt_.unk_token.empty()) {
    unk_id_ = vocab_.find(opt_.unk_token);
    if (unk_id_ < 0) throw Error(where + ": model.unk_token '" + opt_.unk_token + "' is not in the vocabulary");
  }
  const auto& alphabet = ByteLevelAlphabet::get();
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = vocab_.find(alphabet.byte_to_utf8[b]);
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    fallback_ids_[b] = vocab_.find(name);
  }
  // Chars that some token joins to a following "▁" (see encode_word); with unknown chars (no
  // one-char token, so byte fallback or <unk>) a cut is never made either.
  std::vector<bool> joins(0x110000, false);
  bool has_metaspace = false;
  for (size_t id = 0; id < tokens_.size(); ++id) {
    std::string_view t = id_to_token(int32_t(id));
    if (t.find("\xE2\x96\x81") == std::string_view::npos || utf8_valid_prefix(t) != t.size()) continue;
    char32_t prev = 0, cp;
    for (size_t i = 0; i < t.size();) {
      i += utf8_decode(t, i, cp);
      if (cp == kMetaspace) {
        has_metaspace = true;
        if (prev) joins[prev] = true;
      }
      prev = cp;
    }
  }
  char_ids_.assign(0x110000, -1);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    std::string_view t = id_to_token(int32_t(id));
    if (t.empty() || size_t(utf8_len((unsigned char)t[0])) != t.size() || utf8_valid_prefix(t) != t.size()) continue;
    char32_t cp;
    utf8_decode(t, 0, cp);
    char_ids_[cp] = int32_t(id);
  }
  for (char32_t c = 0; c < 0x110000; ++c)
    if (char_ids_[c] < 0) joins[c] = true;
  joins_metaspace_ = std::move(joins);
  split_at_spaces_ = has_metaspace && plain_symbols_;

  // Resolve each merge to (left, right, merged) ids. Lookups go in batches: hashing and
  // prefetching a batch before probing overlaps the cache misses that dominate large vocabularies.
  struct Resolved {
    int32_t a, b, merged;
  };
  std::vector<Resolved> resolved(merges.size());
  const size_t skip = opt_.continuing_subword_prefix.size();
  parallel_ranges(merges.size(), [&](size_t begin, size_t end) {
    constexpr size_t kBatch = 32;
    uint64_t ha[kBatch], hb[kBatch], hm[kBatch];
    std::string merged[kBatch];
    for (size_t base = begin; base < end; base += kBatch) {
      size_t n = std::min(kBatch, end - base);
      for (size_t i = 0; i < n; ++i) {
        const MergeText& m = merges[base + i];
        ha[i] = vocab_.prefetch(m.a);
        hb[i] = vocab_.prefetch(m.b);
        merged[i].assign(m.a);
        merged[i].append(m.b.substr(std::min(skip, m.b.size())));
        hm[i] = vocab_.prefetch(merged[i]);
      }
      for (size_t i = 0; i < n; ++i) {
        const MergeText& m = merges[base + i];
        Resolved& r = resolved[base + i];
        r = {vocab_.find(m.a, ha[i]), vocab_.find(m.b, hb[i]), vocab_.find(merged[i], hm[i])};
        if (r.a < 0 || r.b < 0)
          throw Error(where + ": merge '" + std::string(m.a) + " " + std::string(m.b) +
                      "' uses a token missing from the vocabulary");
        if (r.merged < 0) throw Error(where + ": merged token '" + merged[i] + "' is not in the vocabulary");
      }
    }
  });
  merges_.reserve(resolved.size());
  constexpr size_t kBatch = 32;
  for (size_t base = 0; base < resolved.size(); base += kBatch) {
    size_t n = std::min(kBatch, resolved.size() - base);
    for (size_t i = 0; i < n; ++i) merges_.prefetch(resolved[base + i].a, resolved[base + i].b);
    for (size_t i = 0; i < n; ++i) {
      const Resolved& r = resolved[base + i];
      merges_.insert(r.a, r.b, {int32_t(base + i), r.merged});
    }
  }
}

void BpeModel::initial_symbols(std::string_view word, bool byte_level, std::vector<int32_t>& syms) const {
  const auto& alphabet = ByteLevelAlphabet::get();
  int32_t pending_unk = -1;  // a run of unknown chars becomes one <unk> with fuse_unk
  auto known = [&](int32_t id) {
    if (pending_unk >= 0) syms.push_back(pending_unk);
    pending_unk = -1;
    syms.push_back(id);
  };
  auto unknown = [&](std::string_view text) {
    if (opt_.byte_fallback) {
      bool all = true;
      for (unsigned char c : text) all = all && fallback_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : text) syms.push_back(fallback_ids_[c]);
        return;
      }
    }
    if (unk_id_ < 0) return;  // no unk token: the reference drops the char
    if (pending_unk >= 0 && !opt_.fuse_unk) syms.push_back(pending_unk);
    pending_unk = unk_id_;
  };
  std::string sym;
  for (size_t i = 0; i < word.size();) {
    size_t n;
    std::string_view ch;
    if (byte_level) {
      n = 1;
      ch = alphabet.byte_to_utf8[(unsigned char)word[i]];
    } else {
      n = utf8_len((unsigned char)word[i]);
      ch = word.substr(i, n);
    }
    if (plain_symbols_) {
      int32_t id;
      if (byte_level) {
        id = byte_ids_[(unsigned char)word[i]];
      } else {
        char32_t cp;
        utf8_decode(word, i, cp);
        id = char_ids_[cp];
      }
      if (id >= 0) known(id);
      else unknown(ch);
    } else {
      sym.clear();
      if (i > 0) sym += opt_.continuing_subword_prefix;
      sym += ch;
      if (i + n == word.size()) sym += opt_.end_of_word_suffix;
      int32_t id = vocab_.find(sym);
      if (id >= 0) known(id);
      else unknown(sym);
    }
    i += n;
  }
  if (pending_unk >= 0) syms.push_back(pending_unk);
}

void BpeModel::merge(std::vector<int32_t>& s) const {
  constexpr size_t kShort = 64;
  size_t n = s.size();
  if (n < 2) return;
  if (n > kShort) return merge_long(s);
  // Short words: repeatedly merge the lowest-rank pair, leftmost first (the reference's order).
  int32_t rank[kShort], merged[kShort];
  auto look = [&](size_t i) {
    auto v = merges_.find(s[i], s[i + 1]);
    rank[i] = v.rank < 0 ? INT_MAX : v.rank;
    merged[i] = v.id;
  };
  for (size_t i = 0; i + 1 < n; ++i) look(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == INT_MAX) break;
    s[best] = merged[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      s[i] = s[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) look(best - 1);
    if (best + 1 < n) look(best);
  }
  s.resize(n);
}

void BpeModel::merge_long(std::vector<int32_t>& s) const {
  // Linked symbols and a min-heap of (rank, position) candidates, stale ones skipped on pop.
  struct Sym {
    int32_t id, prev, next;
  };
  const int32_t n = int32_t(s.size());
  std::vector<Sym> sym(n);
  for (int32_t i = 0; i < n; ++i) sym[i] = {s[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> heap;
  auto push = [&](int32_t i) {
    int32_t j = sym[i].next;
    if (j < 0) return;
    auto v = merges_.find(sym[i].id, sym[j].id);
    if (v.rank >= 0) heap.push((uint64_t(v.rank) << 32) | uint32_t(i));
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    uint64_t top = heap.top();
    heap.pop();
    int32_t i = int32_t(top & 0xFFFFFFFF), rank = int32_t(top >> 32);
    int32_t j = sym[i].next;
    if (sym[i].id < 0 || j < 0) continue;
    auto v = merges_.find(sym[i].id, sym[j].id);
    if (v.rank != rank) continue;
    sym[i].id = v.id;
    sym[i].next = sym[j].next;
    if (sym[j].next >= 0) sym[sym[j].next].prev = i;
    sym[j].id = -1;
    if (sym[i].prev >= 0) push(sym[i].prev);
    push(i);
  }
  s.clear();
  for (int32_t i = 0; i >= 0 && i < n; i = sym[i].next) s.push_back(sym[i].id);
}

void BpeModel::encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const {
  if (byte_level || !split_at_spaces_) return encode_piece(word, byte_level, out);
  // SentencePiece-style words can be whole paragraphs. Cut them before each "▁" that follows a
  // char no vocabulary token joins to a "▁": no merge can span such a cut, so encoding the
  // pieces apart gives the same ids (and lets the word cache work).
  size_t start = 0;
  char32_t prev = 0;
  for (size_t i = 0; i < word.size();) {
    char32_t cp;
    int n = utf8_decode(word, i, cp);
    if (cp == kMetaspace && i > start && prev != kMetaspace && prev < joins_metaspace_.size() && !joins_metaspace_[prev]) {
      encode_piece(word.substr(start, i - start), false, out);
      start = i;
    }
    prev = cp;
    i += n;
  }
  encode_piece(word.substr(start), false, out);
}

void BpeModel::encode_piece(std::string_view word, bool byte_level, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  WordCache::Entry* slot = nullptr;
  uint64_t h = 0;
  if (word.size() <= WordCache::kMaxWord) {
    h = hash_bytes(word) | 1;
    slot = &cache_for(instance_).slots[h & (WordCache::kSlots - 1)];
    if (slot->hash == h && slot->len == word.size() && std::memcmp(slot->key, word.data(), word.size()) == 0) {
      out.insert(out.end(), slot->ids, slot->ids + slot->n_ids);
      return;
    }
  }
  const size_t first = out.size();
  int32_t whole = -1;
  if (opt_.ignore_merges) {
    if (byte_level) {
      thread_local std::string mapped;
      const auto& alphabet = ByteLevelAlphabet::get();
      mapped.clear();
      for (unsigned char c : word) mapped += alphabet.byte_to_utf8[c];
      whole = vocab_.find(mapped);
    } else {
      whole = vocab_.find(word);
    }
  }
  if (whole >= 0) {
    out.push_back(whole);
  } else {
    thread_local std::vector<int32_t> syms;
    syms.clear();
    initial_symbols(word, byte_level, syms);
    merge(syms);
    out.insert(out.end(), syms.begin(), syms.end());
  }
  size_t n = out.size() - first;
  if (slot && n <= WordCache::kMaxIds) {
    slot->hash = h;
    slot->len = uint8_t(word.size());
    std::memcpy(slot->key, word.data(), word.size());
    slot->n_ids = uint8_t(n);
    std::copy(out.begin() + std::ptrdiff_t(first), out.end(), slot->ids);
  }
}

}  // namespace tessera::tok

#include "engine/block_manager.h"

#include "core/error.h"

namespace tessera {

BlockManager::BlockManager(int num_blocks, int block_size) : block_size_(block_size), blocks_(size_t(num_blocks)) {
  TESSERA_CHECK(num_blocks > 0 && block_size > 0, "KV cache needs at least one block");
  for (int32_t i = 0; i < num_blocks; ++i) {
    free_.push_back(i);
    blocks_[i].free_it = std::prev(free_.end());
    blocks_[i].in_free = true;
  }
}

uint64_t BlockManager::chain_hash(uint64_t parent, const int32_t* tokens, int n) {
  // splitmix64-style mixing of the parent hash and each token.
  uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < n; ++i) {
    h ^= uint64_t(uint32_t(tokens[i])) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return h;
}

void BlockManager::unfree(int32_t id) {
  Block& b = blocks_[id];
  if (b.in_free) {
    free_.erase(b.free_it);
    b.in_free = false;
  }
}

int32_t BlockManager::take_free_block() {
  int32_t id = free_.front();
  unfree(id);
  Block& b = blocks_[id];
  if (b.cached) {  // evict: its old contents are no longer findable
    by_hash_.erase(b.hash);
    b.cached = false;
  }
  b.tokens.clear();
  b.ref_count = 1;
  return id;
}

void BlockManager::reuse_cached_prefix(Sequence& seq) {
  TESSERA_CHECK(seq.block_table.empty(), "reuse_cached_prefix on a sequence that holds blocks");
  // Leave the last token to compute; a sequence scoring its prompt computes all of it.
  int usable = seq.prompt_logprobs >= 0 ? 0 : (seq.num_prompt_tokens - 1) / block_size_;
  uint64_t h = 0;
  for (int i = 0; i < usable; ++i) {
    const int32_t* toks = seq.tokens.data() + size_t(i) * block_size_;
    h = chain_hash(h, toks, block_size_);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    Block& b = blocks_[it->second];
    if (!std::equal(b.tokens.begin(), b.tokens.end(), toks)) break;  // hash collision
    unfree(it->second);
    b.ref_count++;
    seq.block_table.push_back(it->second);
    seq.block_hashes.push_back(h);
  }
  seq.num_computed_tokens = seq.num_cached_tokens = int(seq.block_table.size()) * block_size_;
}

bool BlockManager::ensure_capacity(Sequence& seq, int num_tokens) {
  int needed = (num_tokens + block_size_ - 1) / block_size_ - int(seq.block_table.size());
  if (needed <= 0) return true;
  if (needed > num_free_blocks()) return false;
  for (int i = 0; i < needed; ++i) seq.block_table.push_back(take_free_block());
  return true;
}

void BlockManager::register_full_blocks(Sequence& seq) {
  int full = seq.num_computed_tokens / block_size_;
  uint64_t h = seq.block_hashes.empty() ? 0 : seq.block_hashes.back();
  for (int i = int(seq.block_hashes.size()); i < full; ++i) {
    const int32_t* toks = seq.tokens.data() + size_t(i) * block_size_;
    h = chain_hash(h, toks, block_size_);
    seq.block_hashes.push_back(h);
    Block& b = blocks_[seq.block_table[i]];
    if (b.cached || by_hash_.count(h)) continue;  // another block already holds this prefix
    b.hash = h;
    b.cached = true;
    b.tokens.assign(toks, toks + block_size_);
    by_hash_[h] = seq.block_table[i];
  }
}

void BlockManager::release(Sequence& seq) {
  // Tail blocks first, so a shared prefix outlives the unique suffixes that follow it.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& b = blocks_[*it];
    TESSERA_CHECK(b.ref_count > 0, "block released twice");
    if (--b.ref_count == 0) {
      // Uncached blocks go first in line; cached ones are kept as long as possible.
      if (b.cached) free_.push_back(*it), b.free_it = std::prev(free_.end());
      else free_.push_front(*it), b.free_it = free_.begin();
      b.in_free = true;
    }
  }
  seq.block_table.clear();
  seq.block_hashes.clear();
  seq.num_computed_tokens = 0;
}

}  // namespace tessera

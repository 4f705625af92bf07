// Paged KV block allocation with automatic prefix caching. Pure CPU bookkeeping: it never
// touches tensors. Each full block is identified by a hash chained over all tokens up to its
// end, so equal hashes mean equal prefixes; a hit also compares the block's tokens.
// Blocks whose last user is gone stay cached (evictable, least recently freed first) until
// their memory is needed.
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace tessera {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size);

  int block_size() const { return block_size_; }
  int num_blocks() const { return int(blocks_.size()); }
  // Blocks that can be handed out now (never used, or cached but unreferenced).
  int num_free_blocks() const { return int(free_.size()); }
  int num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  int num_cached_blocks() const { return int(by_hash_.size()); }

  // Gives a waiting sequence (empty block table) its cached prefix: full prompt blocks found in
  // the cache are shared, and num_computed_tokens/num_cached_tokens advance past them. At least
  // the prompt's last token is always left to compute, so that it yields logits.
  void reuse_cached_prefix(Sequence& seq);
  // Grows the block table to hold `num_tokens` tokens. False (and no change) if blocks are short.
  bool ensure_capacity(Sequence& seq, int num_tokens);
  // Registers the sequence's newly filled blocks in the prefix cache (call after a step).
  void register_full_blocks(Sequence& seq);
  // Releases the sequence's blocks; it must start from scratch if it is scheduled again.
  void release(Sequence& seq);

  static uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int n);

 private:
  struct Block {
    int ref_count = 0;
    uint64_t hash = 0;
    bool cached = false;                 // present in by_hash_
    std::vector<int32_t> tokens;         // contents, to verify a hash hit
    std::list<int32_t>::iterator free_it;
    bool in_free = false;
  };
  int32_t take_free_block();
  void unfree(int32_t id);

  int block_size_;
  std::vector<Block> blocks_;
  std::list<int32_t> free_;  // front: evicted first
  std::unordered_map<uint64_t, int32_t> by_hash_;
};

}  // namespace tessera

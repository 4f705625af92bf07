#include <gtest/gtest.h>

#include <numeric>

#include "engine/block_manager.h"

using namespace tessera;

namespace {

Sequence make_seq(std::vector<int32_t> tokens) {
  Sequence s;
  s.num_prompt_tokens = int(tokens.size());
  s.tokens = std::move(tokens);
  return s;
}

std::vector<int32_t> range(int n, int start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Simulates a step that computes every pending token.
void compute_all(BlockManager& bm, Sequence& s) {
  ASSERT_TRUE(bm.ensure_capacity(s, s.num_tokens()));
  s.num_computed_tokens = s.num_tokens();
  bm.register_full_blocks(s);
}

TEST(BlockManager, AllocatesAndReleases) {
  BlockManager bm(10, 4);
  auto s = make_seq(range(9));
  EXPECT_TRUE(bm.ensure_capacity(s, 9));
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  EXPECT_TRUE(bm.ensure_capacity(s, 12));  // still fits in 3 blocks
  EXPECT_EQ(bm.num_free_blocks(), 7);
  bm.release(s);
  EXPECT_EQ(bm.num_free_blocks(), 10);
  EXPECT_TRUE(s.block_table.empty());
}

TEST(BlockManager, CapacityFailureChangesNothing) {
  BlockManager bm(3, 4);
  auto s = make_seq(range(20));
  EXPECT_FALSE(bm.ensure_capacity(s, 20));
  EXPECT_TRUE(s.block_table.empty());
  EXPECT_EQ(bm.num_free_blocks(), 3);
}

TEST(BlockManager, PrefixReuseSharesFullBlocksAndLeavesLastTokenToCompute) {
  BlockManager bm(16, 4);
  auto a = make_seq(range(10));
  compute_all(bm, a);
  EXPECT_EQ(bm.num_cached_blocks(), 2);  // two full blocks of 4

  auto b = make_seq(range(10));  // same prompt
  bm.reuse_cached_prefix(b);
  EXPECT_EQ(b.num_cached_tokens, 8);
  EXPECT_EQ(b.num_computed_tokens, 8);
  EXPECT_EQ(std::vector<int32_t>(b.block_table.begin(), b.block_table.end()),
            std::vector<int32_t>(a.block_table.begin(), a.block_table.begin() + 2));

  // A prompt that is exactly two full cached blocks reuses only one: its last token must run.
  auto c = make_seq(range(8));
  bm.reuse_cached_prefix(c);
  EXPECT_EQ(c.num_cached_tokens, 4);

  // A different second block: only the first block is shared.
  auto d_tokens = range(10);
  d_tokens[5] = 99;
  auto d = make_seq(d_tokens);
  bm.reuse_cached_prefix(d);
  EXPECT_EQ(d.num_cached_tokens, 4);

  // The same block contents after a different first block is a different prefix: no hit.
  auto e_tokens = range(10);
  e_tokens[0] = 77;
  auto e = make_seq(e_tokens);
  bm.reuse_cached_prefix(e);
  EXPECT_EQ(e.num_cached_tokens, 0);
}

TEST(BlockManager, SharedBlocksAreRefCounted) {
  BlockManager bm(8, 4);
  auto a = make_seq(range(9));
  compute_all(bm, a);
  auto b = make_seq(range(9));
  bm.reuse_cached_prefix(b);
  compute_all(bm, b);
  EXPECT_EQ(bm.num_used_blocks(), 4);  // 2 shared + one tail each
  bm.release(a);
  EXPECT_EQ(bm.num_used_blocks(), 3);  // b still holds the shared blocks
  bm.release(b);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_cached_blocks(), 2);  // cached contents survive until evicted
}

TEST(BlockManager, EvictsUncachedFirstThenLeastRecentlyFreed) {
  BlockManager bm(4, 2);
  auto a = make_seq(range(4, 0));
  compute_all(bm, a);  // 2 cached blocks
  bm.release(a);
  auto b = make_seq(range(4, 100));
  compute_all(bm, b);  // takes the 2 never-cached blocks first
  EXPECT_EQ(bm.num_cached_blocks(), 4);
  bm.release(b);
  // A new sequence needing 2 blocks evicts a's blocks (freed earlier), not b's.
  auto c = make_seq(range(3, 200));
  ASSERT_TRUE(bm.ensure_capacity(c, 3));
  auto again_b = make_seq(range(5, 100));
  bm.reuse_cached_prefix(again_b);
  EXPECT_EQ(again_b.num_cached_tokens, 4);
  auto again_a = make_seq(range(5, 0));
  bm.reuse_cached_prefix(again_a);
  EXPECT_EQ(again_a.num_cached_tokens, 0);
}

TEST(BlockManager, DecodeFilledBlocksBecomeReusable) {
  BlockManager bm(8, 4);
  auto a = make_seq(range(3));
  compute_all(bm, a);
  for (int32_t t : {50, 51, 52}) {  // generated tokens fill the first block and start a second
    a.tokens.push_back(t);
    compute_all(bm, a);
  }
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  auto b = make_seq({0, 1, 2, 50, 51, 52});
  bm.reuse_cached_prefix(b);
  EXPECT_EQ(b.num_cached_tokens, 4);
}

TEST(BlockManager, ChainHashDependsOnParentAndTokens) {
  int32_t t1[] = {1, 2, 3}, t2[] = {1, 2, 4};
  EXPECT_NE(BlockManager::chain_hash(0, t1, 3), BlockManager::chain_hash(0, t2, 3));
  EXPECT_NE(BlockManager::chain_hash(0, t1, 3), BlockManager::chain_hash(1, t1, 3));
  EXPECT_EQ(BlockManager::chain_hash(5, t1, 3), BlockManager::chain_hash(5, t1, 3));
}

}  // namespace

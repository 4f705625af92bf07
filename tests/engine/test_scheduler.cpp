#include <gtest/gtest.h>

#include "engine/scheduler.h"

using namespace tessera;

namespace {

Sequence make_seq(int n) {
  Sequence s;
  s.tokens.assign(size_t(n), 5);
  s.num_prompt_tokens = n;
  return s;
}

int total_tokens(const std::vector<ScheduledSeq>& b) {
  int t = 0;
  for (auto& x : b) t += x.num_new_tokens;
  return t;
}

TEST(Scheduler, ChunksPrefillUnderTheTokenBudget) {
  BlockManager bm(64, 4);
  Scheduler sch({.max_num_seqs = 8, .max_num_batched_tokens = 10}, bm);
  Sequence a = make_seq(25);
  sch.add(&a);
  std::vector<int> chunks;
  while (a.num_computed_tokens < a.num_tokens()) {
    auto b = sch.schedule();
    ASSERT_EQ(b.size(), 1u);
    chunks.push_back(b[0].num_new_tokens);
    a.num_computed_tokens += b[0].num_new_tokens;
  }
  EXPECT_EQ(chunks, (std::vector<int>{10, 10, 5}));
}

// A sequence scoring its prompt takes at most kMaxScoredTokensPerStep of it a step (a row of
// logits each); another one in the same step takes what the budget leaves.
TEST(Scheduler, ChunksAScoredPromptSmaller) {
  BlockManager bm(1024, 4);
  Scheduler sch({.max_num_seqs = 8, .max_num_batched_tokens = 2048}, bm);
  Sequence scored = make_seq(1300), plain = make_seq(1300);
  scored.prompt_logprobs = 0;
  sch.add(&scored);
  sch.add(&plain);
  auto b = sch.schedule();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].num_new_tokens, kMaxScoredTokensPerStep);
  EXPECT_EQ(b[1].num_new_tokens, 1300);
}

TEST(Scheduler, DecodesRunningBeforeAdmittingAndRespectsSeatLimit) {
  BlockManager bm(64, 4);
  Scheduler sch({.max_num_seqs = 2, .max_num_batched_tokens = 12}, bm);
  Sequence a = make_seq(4), b = make_seq(20), c = make_seq(3);
  sch.add(&a);
  auto s1 = sch.schedule();
  a.num_computed_tokens = 4;
  a.tokens.push_back(7);  // sampled
  sch.add(&b);
  sch.add(&c);
  auto s2 = sch.schedule();
  ASSERT_EQ(s2.size(), 2u);  // a's decode token first, then b's first chunk; c has no seat
  EXPECT_EQ(s2[0].seq, &a);
  EXPECT_EQ(s2[0].num_new_tokens, 1);
  EXPECT_EQ(s2[1].seq, &b);
  EXPECT_EQ(s2[1].num_new_tokens, 11);
  EXPECT_EQ(total_tokens(s2), 12);
  EXPECT_EQ(sch.num_waiting(), 1);
}

TEST(Scheduler, PreemptsNewestWhenBlocksRunOut) {
  BlockManager bm(4, 4);  // 16 tokens in all
  Scheduler sch({.max_num_seqs = 8, .max_num_batched_tokens = 64}, bm);
  Sequence a = make_seq(8), b = make_seq(8);
  sch.add(&a);
  sch.add(&b);
  auto s1 = sch.schedule();
  ASSERT_EQ(s1.size(), 2u);
  a.num_computed_tokens = b.num_computed_tokens = 8;
  a.tokens.push_back(1);
  b.tokens.push_back(1);
  auto s2 = sch.schedule();  // a needs a third block: b (newest) is preempted
  ASSERT_EQ(s2.size(), 1u);
  EXPECT_EQ(s2[0].seq, &a);
  EXPECT_EQ(b.status, SeqStatus::Waiting);
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(sch.num_preemptions(), 1);
}

TEST(Scheduler, RemoveFreesBlocks) {
  BlockManager bm(8, 4);
  Scheduler sch({}, bm);
  Sequence a = make_seq(10);
  sch.add(&a);
  sch.schedule();
  EXPECT_EQ(bm.num_used_blocks(), 3);
  sch.remove(&a);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_TRUE(sch.empty());
}

}  // namespace

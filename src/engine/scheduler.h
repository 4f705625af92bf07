// Continuous batching: each step picks which sequences compute how many of their pending
// tokens, under a token budget. Running sequences go first (decode tokens and unfinished
// prompt chunks alike), then waiting ones are admitted while blocks and budget last. When
// blocks run out, the most recently admitted running sequence is preempted: its blocks are
// released and it is recomputed later (its cached prefix usually survives).
// The scheduler decides policy only; it never touches tensors.
#pragma once
#include <deque>
#include <vector>

#include "engine/block_manager.h"

namespace tessera {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
};

// The most prompt tokens a step computes of a sequence scoring its prompt
// (Sequence::prompt_logprobs): each brings a row of logits as wide as the vocabulary (512 rows of
// a 128k vocabulary: 256 MB), beyond what the KV budget's profiled step measured.
constexpr int kMaxScoredTokensPerStep = 512;

struct ScheduledSeq {
  Sequence* seq;
  int num_new_tokens;  // computes tokens [num_computed_tokens, num_computed_tokens + num_new_tokens)
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, BlockManager& blocks) : cfg_(cfg), blocks_(blocks) {}

  void add(Sequence* seq) { waiting_.push_back(seq); }
  // Removes a sequence wherever it is and releases its blocks.
  void remove(Sequence* seq);
  std::vector<ScheduledSeq> schedule();

  int num_waiting() const { return int(waiting_.size()); }
  int num_running() const { return int(running_.size()); }
  bool empty() const { return waiting_.empty() && running_.empty(); }
  int64_t num_preemptions() const { return num_preemptions_; }

 private:
  void preempt(Sequence* seq);
  // The tokens a step gives seq within `budget`: its pending ones, at most
  // kMaxScoredTokensPerStep while it scores its prompt.
  static int chunk(const Sequence& seq, int budget);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  int64_t num_preemptions_ = 0;
};

}  // namespace tessera

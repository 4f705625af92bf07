#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace tessera {

void Scheduler::remove(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  blocks_.release(*seq);
}

void Scheduler::preempt(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  blocks_.release(*seq);
  seq->status = SeqStatus::Waiting;
  waiting_.push_front(seq);
  ++num_preemptions_;
}

int Scheduler::chunk(const Sequence& seq, int budget) {
  const int n = std::min(seq.num_tokens() - seq.num_computed_tokens, budget);
  return seq.scores_prompt() ? std::min(n, kMaxScoredTokensPerStep) : n;
}

std::vector<ScheduledSeq> Scheduler::schedule() {
  std::vector<ScheduledSeq> out;
  int budget = cfg_.max_num_batched_tokens;

  // Running sequences, oldest first; the newest are preempted when blocks run short.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    int n = chunk(*s, budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool ok = blocks_.ensure_capacity(*s, s->num_computed_tokens + n);
    while (!ok && running_.back() != s) {
      preempt(running_.back());  // always after s, so not yet scheduled this step
      ok = blocks_.ensure_capacity(*s, s->num_computed_tokens + n);
    }
    if (!ok) {  // not even room for itself alone: wait until others finish
      preempt(s);
      break;
    }
    out.push_back({s, n});
    budget -= n;
    ++i;
  }

  // Admit waiting sequences while there is budget, a seat and memory.
  while (!waiting_.empty() && budget > 0 && int(running_.size()) < cfg_.max_num_seqs) {
    Sequence* s = waiting_.front();
    blocks_.reuse_cached_prefix(*s);
    int n = chunk(*s, budget);
    if (!blocks_.ensure_capacity(*s, s->num_computed_tokens + n)) {
      blocks_.release(*s);
      s->num_cached_tokens = 0;
      break;
    }
    waiting_.pop_front();
    s->status = SeqStatus::Running;
    running_.push_back(s);
    out.push_back({s, n});
    budget -= n;
  }
  return out;
}

}  // namespace tessera

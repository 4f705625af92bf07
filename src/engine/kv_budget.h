// How large an engine's KV cache is. A byte budget buys floor(bytes / block bytes) blocks, nothing
// held back. Without a budget (the GPU default) it is vLLM's rule: a fraction of the device's
// memory, less what is in use once the weights are loaded and the largest step the scheduler can
// form has run once (its activations stay in the backend's caching allocator).
#pragma once
#include <string>

#include "engine/scheduler.h"
#include "models/model.h"

namespace tessera {

// Blocks that fit in `bytes` for a model's KV cache.
int num_kv_blocks(const KvCacheSpec& spec, size_t bytes, int block_size);

struct ProfiledBudget {
  size_t kv_bytes = 0;      // what is left for the KV cache
  size_t total = 0;         // the device's memory
  size_t in_use = 0;        // used after the profiled step (weights, activations, runtime, others)
  int step_tokens = 0;      // tokens of the profiled step
  float utilization = 0;
};
// Runs one step of sc.max_num_batched_tokens tokens over min(max_num_seqs, tokens) sequences
// (every sequence wanting logits) and measures what the device has left. Throws when the
// fraction is already used up.
ProfiledBudget profile_kv_budget(Model& model, Backend& be, const KvCacheSpec& spec, int block_size,
                                 const SchedulerConfig& sc, float utilization);

// "327680 tokens (40.00 GiB, BF16)"
std::string describe_kv_capacity(const KvCacheSpec& spec, int num_blocks, int block_size);

}  // namespace tessera

#include "engine/kv_budget.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "core/error.h"
#include "runner/model_runner.h"

namespace tessera {

int num_kv_blocks(const KvCacheSpec& spec, size_t bytes, int block_size) {
  size_t blocks = bytes / (spec.bytes_per_token() * size_t(block_size));
  return int(std::min<size_t>(blocks, INT_MAX));
}

ProfiledBudget profile_kv_budget(Model& model, Backend& be, const KvCacheSpec& spec, int block_size,
                                 const SchedulerConfig& sc, float utilization) {
  TESSERA_CHECK(utilization > 0 && utilization <= 1, "the GPU memory utilization must be in (0, 1]");
  ProfiledBudget b;
  b.step_tokens = sc.max_num_batched_tokens;
  b.utilization = utilization;
  {
    // Every block table points at block 0 of a one-block cache: the keys read are garbage, but
    // the step allocates what a real one of this size does, without a cache to match.
    KvCache scratch = allocate_kv_cache(be, spec, 1, block_size);
    const int S = std::max(1, std::min(sc.max_num_seqs, b.step_tokens));
    std::vector<Sequence> seqs(static_cast<size_t>(S));
    std::vector<ScheduledSeq> batch;
    for (int i = 0; i < S; ++i) {
      Sequence& s = seqs[size_t(i)];
      int len = b.step_tokens / S + (i < b.step_tokens % S);
      s.tokens.assign(size_t(len), 0);
      s.num_prompt_tokens = len;
      s.block_table.assign(size_t((len + block_size - 1) / block_size), 0);
      batch.push_back({&s, len});
    }
    ModelRunner(model, be, scratch, /*replay=*/false).run(batch);  // downloads the logits: the step has finished
  }
  MemoryInfo m = be.memory_info();
  b.total = m.total;
  b.in_use = m.total - m.free;
  size_t allowed = size_t(double(m.total) * utilization);
  char msg[256];
  std::snprintf(msg, sizeof msg,
                "no memory left for the KV cache: %.2f GiB of %.2f GiB are in use after loading the model and a "
                "%d-token step, and --gpu-memory-utilization %.2f allows %.2f GiB (raise it, or lower "
                "--max-num-batched-tokens)",
                double(b.in_use) / (1 << 30), double(m.total) / (1 << 30), b.step_tokens, utilization,
                double(allowed) / (1 << 30));
  TESSERA_CHECK(allowed > b.in_use, msg);
  b.kv_bytes = allowed - b.in_use;
  return b;
}

std::string describe_kv_capacity(const KvCacheSpec& spec, int num_blocks, int block_size) {
  char s[128];
  std::snprintf(s, sizeof s, "%lld tokens (%.2f GiB, %s)", (long long)num_blocks * block_size,
                double(spec.bytes_per_token()) * num_blocks * block_size / double(1 << 30),
                std::string(dtype_name(spec.dtype)).c_str());
  return s;
}

}  // namespace tessera

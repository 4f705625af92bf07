// The inputs of one engine step, flattened over every scheduled sequence (varlen, no padding),
// in backend memory. Built by the runner; read by every layer.
#pragma once
#include <vector>

#include "backend/backend.h"

namespace tessera {

struct ForwardBatch {
  Tensor token_ids;     // [T] i32
  Tensor slot_mapping;  // [T] i32: KV cache row each new token's k/v is written to
  Tensor logits_rows;   // [R] i32: rows of the batch whose logits are wanted
  AttentionMeta attn;   // positions, per-sequence offsets, context lengths, block tables
  int num_tokens = 0;
  int num_logits = 0;
  int max_position = 0;
};

// Paged KV cache: per layer, K and V of [num_blocks * block_size, Hkv, Dh] in the spec's dtype.
// Block b holds rows [b * block_size, (b + 1) * block_size).
struct KvCache {
  int num_blocks = 0;
  int block_size = 0;
  std::vector<Tensor> k, v;
};

struct KvCacheSpec {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::F32;  // F32, BF16 or F16; new k/v are rounded to it (nearest even) when stored
  size_t bytes_per_token() const { return size_t(num_layers) * num_kv_heads * head_dim * 2 * dtype_size(dtype); }
};

// One backend allocation holding every layer's K and V, so that a cache sized to a memory budget
// takes exactly that much (no per-tensor rounding of the allocator).
KvCache allocate_kv_cache(Backend& be, const KvCacheSpec& spec, int num_blocks, int block_size);

}  // namespace tessera

#include "nn/forward_batch.h"

namespace tessera {

KvCache allocate_kv_cache(Backend& be, const KvCacheSpec& spec, int num_blocks, int block_size) {
  KvCache c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  Shape shape{int64_t(num_blocks) * block_size, spec.num_kv_heads, spec.head_dim};
  for (int l = 0; l < spec.num_layers; ++l) {
    c.k.push_back(be.empty(DType::F32, shape));
    c.v.push_back(be.empty(DType::F32, shape));
  }
  return c;
}

}  // namespace tessera

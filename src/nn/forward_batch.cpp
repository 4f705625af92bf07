#include "nn/forward_batch.h"

#include "core/error.h"

namespace tessera {

KvCache allocate_kv_cache(Backend& be, const KvCacheSpec& spec, int num_blocks, int block_size) {
  TESSERA_CHECK(spec.dtype == DType::F32 || spec.dtype == DType::BF16 || spec.dtype == DType::F16,
                "KV cache dtype must be F32, BF16 or F16, not " + std::string(dtype_name(spec.dtype)));
  KvCache c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  const int64_t rows = int64_t(num_blocks) * block_size;
  // pool: [layers * 2 * rows, Hkv, Dh], layer l's K then V.
  Tensor pool = be.empty(spec.dtype, {int64_t(spec.num_layers) * 2 * rows, spec.num_kv_heads, spec.head_dim});
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    c.k.push_back(pool.slice_rows(2 * l * rows, (2 * l + 1) * rows));
    c.v.push_back(pool.slice_rows((2 * l + 1) * rows, (2 * l + 2) * rows));
  }
  return c;
}

}  // namespace tessera

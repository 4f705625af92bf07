// KV cache sizing: a byte budget buys floor(bytes / block bytes) blocks, nothing held back.
#include <gtest/gtest.h>

#include "engine/kv_budget.h"

using namespace tessera;

TEST(KvBudget, EightBShapedBf16CacheIn40GiBHoldsOver300kTokens) {
  // Llama 3 8B: 32 layers, 8 kv heads of 128: K and V in bf16 are 128 KiB per token.
  KvCacheSpec spec{32, 8, 128, DType::BF16};
  ASSERT_EQ(spec.bytes_per_token(), size_t(128) << 10);
  size_t bytes = size_t(40) << 30;
  int blocks = num_kv_blocks(spec, bytes, 16);
  EXPECT_EQ(blocks, 20480);
  EXPECT_GE(int64_t(blocks) * 16, 300000);
  EXPECT_EQ(int64_t(blocks) * 16, int64_t(bytes / spec.bytes_per_token()));
}

TEST(KvBudget, BlocksAreTheFloorOfTheBudget) {
  KvCacheSpec spec{2, 2, 8, DType::F32};
  size_t block = spec.bytes_per_token() * 16;
  EXPECT_EQ(spec.bytes_per_token(), 2u * 2 * 8 * 2 * 4);
  EXPECT_EQ(num_kv_blocks(spec, 10 * block, 16), 10);
  EXPECT_EQ(num_kv_blocks(spec, 11 * block - 1, 16), 10);
  EXPECT_EQ(num_kv_blocks(spec, block - 1, 16), 0);
  spec.dtype = DType::F16;
  EXPECT_EQ(num_kv_blocks(spec, 10 * block, 16), 20);  // half the bytes per token
}

TEST(KvBudget, DescribesCapacity) {
  KvCacheSpec spec{32, 8, 128, DType::BF16};
  EXPECT_EQ(describe_kv_capacity(spec, 20480, 16), "327680 tokens (40.00 GiB, BF16)");
}

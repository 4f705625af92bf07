// MLX's affine quantization: the codes' layout in the uint32 words, the groups' scales and biases,
// and config.json's settings (per layer, and the checkpoints refused).
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/mlx_quant.h"

namespace tessera {
namespace {

Tensor f32(Shape shape, std::vector<float> v) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor words(Shape shape, std::vector<uint32_t> v) {
  Tensor t = Tensor::empty(DType::U32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<uint32_t>());
  return t;
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> out;
  for (int64_t i = 0; i < t.numel(); ++i)
    out.push_back(t.dtype() == DType::F32 ? t.data<float>()[i] : bf16_to_f32(t.data<uint16_t>()[i]));
  return out;
}

// Codes fill each word from its lowest bits up: 0x76543210 holds 0, 1, ..., 7 at 4 bits.
TEST(MlxQuant, CodesFromEachWordsLowestBitsUp) {
  Tensor one = f32({1, 1}, {1}), zero = f32({1, 1}, {0});
  EXPECT_EQ(values(dequantized(mlx_quantized(words({1, 2}, {0x76543210, 0xFEDCBA98}), f32({1, 1}, {1}),
                                             f32({1, 1}, {0}), {4, 16}, "x"))),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(values(dequantized(mlx_quantized(words({1, 1}, {0xFF030201}), one, zero, {8, 4}, "x"))),
            (std::vector<float>{1, 2, 3, 255}));
  std::vector<float> two(16, 0);
  two[1] = 1, two[2] = 2, two[3] = 3, two[15] = 3;
  EXPECT_EQ(values(dequantized(mlx_quantized(words({1, 1}, {0xC00000E4}), one, zero, {2, 16}, "x"))), two);
}

// 3, 5 and 6 bits: each row one little-endian bit stream, as MLX's extract_bits reads its packs of
// 3, 5 and 3 bytes. The expected codes are those MLX's formulas give for these (random) words.
TEST(MlxQuant, OddWidthsAreOneBitStreamARow) {
  Tensor one = f32({1, 1}, {1}), zero = f32({1, 1}, {0});
  auto codes = [&](int bits, std::vector<uint32_t> w) {
    return values(dequantized(mlx_quantized(words({1, int64_t(w.size())}, w), one, zero, {bits, 32}, "x")));
  };
  EXPECT_EQ(codes(3, {0xee0eb782, 0x39501a7f, 0xc27ef0be}),
            (std::vector<float>{2, 0, 6, 3, 3, 5, 3, 0, 6, 5, 7, 7, 7, 4, 6, 0,
                                0, 2, 5, 4, 3, 4, 7, 5, 0, 6, 3, 7, 7, 4, 0, 6}));
  EXPECT_EQ(codes(5, {0x6e067f34, 0xc75d8fd0, 0xe3472451, 0x2004340, 0x55546e6b}),
            (std::vector<float>{20, 25, 31, 12, 0,  23, 1, 26, 15, 12, 23, 14, 28, 8,  17, 4,
                                7,  26, 24, 1,  20, 1,  1, 0,  2,  24, 26, 28, 6,  10, 21, 10}));
  EXPECT_EQ(codes(6, {0x6865a094, 0x98c4645d, 0x54d4b80b, 0xa921874a, 0x21ad019a, 0xf69cb59e}),
            (std::vector<float>{20, 2,  26, 25, 40, 53, 5,  25, 4,  35, 57, 2,  56, 18, 13, 21,
                                10, 29, 24, 8,  41, 42, 25, 0,  45, 6,  34, 39, 53, 50, 41, 61}));
}

// Each group of inputs has its own scale and bias; rows have their own groups; bf16 in, bf16 out.
TEST(MlxQuant, ScaleAndBiasPerGroupOfEachRow) {
  Tensor scales = Tensor::empty(DType::BF16, {2, 2}), biases = Tensor::empty(DType::BF16, {2, 2});
  const float s[] = {2, 0.5f, -1, 0.25f}, b[] = {-1, 3, 0.5f, -8};
  for (int i = 0; i < 4; ++i)
    scales.data<uint16_t>()[i] = f32_to_bf16(s[i]), biases.data<uint16_t>()[i] = f32_to_bf16(b[i]);
  Tensor w = dequantized(mlx_quantized(words({2, 2}, {0x00000031, 0x00000002, 0x00000004, 0x50000000}),
                                       scales, biases, {4, 8}, "x"));
  EXPECT_EQ(w.dtype(), DType::BF16);
  EXPECT_EQ(w.shape(), (Shape{2, 16}));
  std::vector<float> want(32);
  for (int i = 0; i < 8; ++i) want[i] = -1, want[8 + i] = 3, want[16 + i] = 0.5f, want[24 + i] = -8;
  want[0] = 2 * 1 - 1, want[1] = 2 * 3 - 1, want[8] = 0.5f * 2 + 3;
  want[16] = -1 * 4 + 0.5f, want[31] = 0.25f * 5 - 8;
  EXPECT_EQ(values(w), want);
}

// A large weight is split over threads by rows: every row is written, each from its own codes.
TEST(MlxQuant, LargeWeightsEveryRow) {
  const int64_t rows = 1000, in = 2048;
  Tensor codes = Tensor::empty(DType::U32, {rows, in / 8});
  for (int64_t i = 0; i < codes.numel(); ++i) codes.data<uint32_t>()[i] = uint32_t(i * 2654435761u);
  Tensor scales = Tensor::empty(DType::F32, {rows, in / 64}),
         biases = Tensor::empty(DType::F32, {rows, in / 64});
  for (int64_t i = 0; i < scales.numel(); ++i)
    scales.data<float>()[i] = float(i % 7 + 1), biases.data<float>()[i] = float(i);
  Tensor w = dequantized(mlx_quantized(codes, scales, biases, {4, 64}, "x"));
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i) {
      const uint32_t code = codes.data<uint32_t>()[r * in / 8 + i / 8] >> (4 * (i % 8)) & 15;
      const int64_t g = r * in / 64 + i / 64;
      wrong += w.data<float>()[r * in + i] != scales.data<float>()[g] * float(code) + biases.data<float>()[g];
    }
  EXPECT_EQ(wrong, 0);
}

TEST(MlxQuant, ShapesThatDoNotFitNameTheLayer) {
  Tensor one = f32({1, 1}, {1});
  try {
    dequantized(mlx_quantized(words({1, 2}, {0, 0}), one, one, {4, 8}, "model.layers.0.mlp.up_proj"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.up_proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[1, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantized(mlx_quantized(words({1, 1}, {0}), one, one, {4, 3}, "x")),
               Error);  // 8 inputs, groups of 3
  EXPECT_THROW(dequantized(mlx_quantized(f32({1, 1}, {0}), one, one, {4, 8}, "x")), Error);  // not codes
}

TEST(MlxQuant, ConfigWithPerLayerSettings) {
  auto q =
      MlxQuantization::from_config(nlohmann::json::parse(R"({"quantization": {"group_size": 64, "bits": 4,
      "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8}, "lm_head": false},
      "quantization_config": {"group_size": 64, "bits": 4}})"));
  ASSERT_TRUE(q);
  auto p = q->of("model.layers.1.mlp.down_proj");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->bits, 4);
  EXPECT_EQ(p->group_size, 64);
  p = q->of("model.layers.0.mlp.down_proj");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->bits, 8);
  EXPECT_EQ(p->group_size, 32);
  EXPECT_FALSE(q->of("lm_head"));
  EXPECT_FALSE(MlxQuantization::from_config(nlohmann::json::parse(R"({"model_type": "llama"})")));
}

TEST(MlxQuant, OtherQuantizationsAreRefusedByName) {
  auto refused = [](const char* config) {
    try {
      MlxQuantization::from_config(nlohmann::json::parse(config));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused(R"({"quantization_config": {"quant_method": "gptq", "bits": 4}})").find("gptq"),
            std::string::npos);
  EXPECT_NE(refused(R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxfp4"}})").find("mxfp4"),
            std::string::npos);
  EXPECT_NE(refused(R"({"quantization": {"group_size": 64, "bits": 7}})").find("7-bit"), std::string::npos);
  EXPECT_NE(refused(R"({"quantization": {"group_size": 64, "bits": 4, "x": {"bits": 1}}})").find("1-bit"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera

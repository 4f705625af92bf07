// MLX-quantized checkpoints: fixtures' layers and embeddings stored as codes (4-bit, some layers 2,
// 3, 5, 6 or 8, one left unquantized, as mlx-lm's mixed quantization writes them; experts stacked
// as mlx-lm stacks them), next to f32 checkpoints of the values the codes mean, written here by
// reading each row's codes as one little-endian bit stream. The CPU backend computes with the codes
// as they are: its logits are those of the f32 checkpoint but for the order of f32 sums. A backend
// that does not hold quantized weights gets them dequantized to the scales' dtype (bf16 here).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "backend/cuda_loader.h"
#include "io/safetensors.h"
#include "model_testutil.h"
#include "testutil.h"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;
using Tensors = std::vector<std::pair<std::string, Tensor>>;

struct Quantized {
  Tensor codes, scales, biases;
  Tensor values;       // f32: what the codes mean, s * q + b (s * q is exact: 8 significant bits by 8)
  Tensor dequantized;  // the values rounded to bf16, as the loader dequantizes them
};

// Random codes for a [rows, in] weight, groups of `group` inputs with random bf16 scales and biases.
Quantized quantize_randomly(int64_t rows, int64_t in, int bits, int group, std::mt19937& rng) {
  Quantized q;
  q.codes = Tensor::empty(DType::U32, {rows, in * bits / 32});
  q.scales = Tensor::empty(DType::BF16, {rows, in / group});
  q.biases = Tensor::empty(DType::BF16, {rows, in / group});
  q.values = Tensor::empty(DType::F32, {rows, in});
  q.dequantized = Tensor::empty(DType::BF16, {rows, in});
  std::uniform_int_distribution<uint32_t> word;
  std::uniform_real_distribution<float> scale(0.01f, 0.3f / float((1 << bits) - 1)), bias(-0.2f, -0.1f);
  for (int64_t i = 0; i < q.codes.numel(); ++i) q.codes.data<uint32_t>()[i] = word(rng);
  for (int64_t i = 0; i < q.scales.numel(); ++i) {
    q.scales.data<uint16_t>()[i] = f32_to_bf16(scale(rng));
    q.biases.data<uint16_t>()[i] = f32_to_bf16(bias(rng));
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(q.codes.data<uint32_t>());
  const int64_t row_bytes = in * bits / 8;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i) {
      uint32_t code = 0;
      for (int b = 0; b < bits; ++b) {
        const int64_t bit = i * bits + b;
        code |= uint32_t(bytes[r * row_bytes + bit / 8] >> (bit % 8) & 1) << b;
      }
      const int64_t g = r * (in / group) + i / group;
      const float w =
          bf16_to_f32(q.scales.data<uint16_t>()[g]) * float(code) + bf16_to_f32(q.biases.data<uint16_t>()[g]);
      q.values.data<float>()[r * in + i] = w;
      q.dequantized.data<uint16_t>()[r * in + i] = f32_to_bf16(w);
    }
  return q;
}

// A fixture written twice: quantized as config["quantization"] says, and plain (f32 values).
class Pair {
 public:
  // `shape` patches the fixture's config (a model of other sizes, its tensors made by the test).
  Pair(const std::string& fixture, nlohmann::json quantization,
       const nlohmann::json& shape = nlohmann::json::object())
      : src_(fixtures_dir() / "models" / fixture),
        tmp_(fs::temp_directory_path() / ("tessera_mlx_" + fixture + std::to_string(::getpid()))),
        config_(nlohmann::json::parse(read_file(src_ / "config.json"))) {
    config_.merge_patch(shape);
    fs::create_directories(tmp_ / "quantized");
    fs::create_directories(tmp_ / "plain");
    std::ofstream(tmp_ / "plain" / "config.json") << config_.dump();
    config_["quantization"] = std::move(quantization);
    write_config();
  }
  ~Pair() { fs::remove_all(tmp_); }
  const fs::path& src() const { return src_; }
  fs::path quantized() const { return tmp_ / "quantized"; }
  fs::path plain() const { return tmp_ / "plain"; }
  nlohmann::json& config() { return config_; }
  void write_config() { std::ofstream(quantized() / "config.json") << config_.dump(); }
  Tensors q, p;  // the two checkpoints' tensors
  std::map<std::string, Quantized> layers;
  void write() {
    write_safetensors(quantized() / "model.safetensors", q);
    write_safetensors(plain() / "model.safetensors", p);
  }
  // `layer`'s [rows, in] weight as codes of the config's width for it.
  Quantized add(const std::string& layer, int64_t rows, int64_t in) {
    const nlohmann::json& c = config_["quantization"];
    const nlohmann::json& s = c.contains(layer) ? c[layer] : c;
    Quantized x = quantize_randomly(rows, in, s.value("bits", c["bits"].get<int>()),
                                    s.value("group_size", c["group_size"].get<int>()), rng_);
    q.emplace_back(layer + ".scales", x.scales);
    q.emplace_back(layer + ".biases", x.biases);
    layers[layer] = x;
    return x;
  }
  // The same as add, and the weight's codes and values in both checkpoints.
  void add_weight(const std::string& layer, int64_t rows, int64_t in) {
    Quantized x = add(layer, rows, in);
    q.emplace_back(layer + ".weight", x.codes), p.emplace_back(layer + ".weight", x.values);
  }
  // A norm's [n] weight, the same in both checkpoints: random values about 1.
  void add_norm(const std::string& name, int64_t n) {
    Tensor t = Tensor::empty(DType::F32, {n});
    std::uniform_real_distribution<float> d(0.8f, 1.2f);
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = d(rng_);
    q.emplace_back(name, t), p.emplace_back(name, t);
  }

 private:
  fs::path src_, tmp_;
  nlohmann::json config_;
  std::mt19937 rng_{7};
};

const std::vector<int32_t> kTokens = {1, 17, 200, 5, 99, 310, 42, 7};

// The same values summed in another order (the quantized and f32 products tile their sums
// differently; the reference backend sums in one sequence): about eps * sqrt(K) relative per
// product, K <= 768 here, through a few layers. A wrong code, scale or group moves logits by
// far more (the fixtures' logits are of order 1-10). Measured: 1e-6 to 3e-6.
constexpr double kSumOrder = 2e-5;

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, sig = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - want[i];
    err += d * d, sig += double(want[i]) * want[i];
  }
  return err / sig;
}

// On a GPU, where there is one: the codes kept there (the tensor-core product on 4-bit codes
// where rows are long enough, else the decode product on 4- and 8-bit codes for 1-2 tokens, and
// bf16 widened as they run past that), and the weights dequantized at load (the GPU's default). Scored by
// NMSE against the f32 checkpoint: a product through bf16 rounds the weights and the activations to bf16,
// which on these fixtures comes to NMSE up to 5.4e-7 (measured on an H100, codes and dequantized alike); the
// limit leaves 20x for other orders of sums. A wrong code, scale or group gives NMSE of order 1.
void expect_same_on_gpu(const Pair& pair, TestModel& plain) {
  std::string why;
  std::unique_ptr<Backend> gpu = load_cuda_backend(0, &why);
  if (!gpu) {
    std::printf("quantized on the GPU: skipped (%s)\n", why.c_str());
    return;
  }
  std::vector<int32_t> longer;
  for (int i = 0; i < 40; ++i) longer.push_back(kTokens[size_t(i) % kTokens.size()] + i);
  for (const bool keep : {true, false}) {
    LoadedModel q = load_model(pair.quantized(), *gpu, keep);
    EXPECT_EQ(q.weights->keeps_quantized(), keep);
    for (const std::vector<int32_t>& tokens : {std::vector<int32_t>{kTokens[0]}, kTokens, longer}) {
      const std::vector<float> want = logits_all_rows(plain, tokens),
                               got = logits_all_rows(*q.model, *gpu, tokens);
      ASSERT_EQ(got.size(), want.size());
      const double e = nmse(got, want);
      std::printf("quantized on the GPU (%s), %zu tokens: logits NMSE %.3g, largest difference %.3g\n",
                  keep ? "codes" : "dequantized at load", tokens.size(), e, max_abs_diff(got, want));
      EXPECT_LT(e, 1e-5) << tokens.size() << " tokens";
    }
  }
}

// The quantized checkpoint's logits on the CPU (fast paths and reference) against the f32 one's;
// and where the weights are dequantized at load, each is its bf16 values exactly.
void expect_same_model(Pair& pair) {
  pair.write();
  TestModel q = load_test_model(pair.quantized()), p = load_test_model(pair.plain());
  TestModel ref = load_test_model(pair.quantized(), /*reference_backend=*/true);
  const std::vector<float> want = logits_all_rows(p, kTokens);
  EXPECT_LT(max_abs_diff(logits_all_rows(q, kTokens), want), kSumOrder);
  EXPECT_LT(max_abs_diff(logits_all_rows(ref, kTokens), want), kSumOrder);
  expect_same_on_gpu(pair, p);

  WeightStore kept(pair.quantized()), dequantized(pair.quantized());
  const auto quantization = MlxQuantization::from_config(pair.config());
  kept.set_quantization(*quantization, true);
  dequantized.set_quantization(*quantization, false);
  // What the weights take widened (the apps keep the codes on a GPU where it would not fit): each
  // quantized layer's bf16 values, and every other tensor as stored.
  size_t widened = 0;
  for (const auto& [name, t] : pair.q) {
    const std::string layer = name.substr(0, name.rfind('.'));
    if (!pair.layers.count(layer)) widened += t.nbytes();
  }
  for (const auto& [layer, x] : pair.layers) widened += x.dequantized.nbytes();
  EXPECT_EQ(dequantized.widened_bytes(), widened);
  EXPECT_LT(kept.total_bytes(), widened);
  EXPECT_EQ(widened_past(pair.quantized(), widened), widened);  // past 90% of the free memory
  EXPECT_EQ(widened_past(pair.quantized(), 2 * widened), std::nullopt);
  EXPECT_EQ(widened_past(pair.plain(), 1), std::nullopt);  // not quantized
  for (const auto& [layer, x] : pair.layers) {
    const Tensor k = kept.get(layer + ".weight"), d = dequantized.get(layer + ".weight");
    ASSERT_TRUE(k.quantization()) << layer;
    EXPECT_EQ(k.raw(), kept.stored(layer + ".weight").raw()) << layer << ": a view of the file, not a copy";
    ASSERT_EQ(d.dtype(), DType::BF16) << layer;
    ASSERT_EQ(d.numel(), x.dequantized.numel()) << layer;
    EXPECT_EQ(std::memcmp(d.raw(), x.dequantized.raw(), d.nbytes()), 0) << layer;
  }
}

TEST(MlxQuantized, ComputesWithItsCodes) {
  const std::string eight_bit = "model.layers.1.mlp.down_proj",
                    unquantized = "model.layers.2.self_attn.o_proj";
  Pair pair("llama", {{"group_size", 32},
                      {"bits", 4},
                      {eight_bit, {{"group_size", 32}, {"bits", 8}}},
                      {"model.layers.0.self_attn.q_proj", {{"bits", 3}}},
                      {"model.layers.0.mlp.gate_proj", {{"bits", 5}}},
                      {"model.layers.0.mlp.up_proj", {{"group_size", 64}, {"bits", 6}}},
                      {"model.layers.0.mlp.down_proj", {{"bits", 2}}},
                      {unquantized, false}});
  WeightStore weights(pair.src());
  int layers = 0;
  for (const std::string& name : weights.names()) {
    Tensor t = weights.get(name);
    const std::string layer = name.substr(0, name.size() - std::string(".weight").size());
    if (t.ndim() != 2 || layer == unquantized) {
      pair.q.emplace_back(name, t), pair.p.emplace_back(name, t);
      continue;
    }
    Quantized x = pair.add(layer, t.dim(0), t.dim(1));
    pair.q.emplace_back(name, x.codes), pair.p.emplace_back(name, x.values);
    ++layers;
  }
  EXPECT_EQ(layers, 1 + 3 * 7 - 1);  // the embedding, and every projection but one
  expect_same_model(pair);
  // A layer stored as codes that config.json leaves unquantized is an error, not read as weights.
  pair.config()["quantization"][eight_bit] = false;
  pair.write_config();
  EXPECT_THROW(load_test_model(pair.quantized()), Error);
}

// A model wide enough for the GPU's tensor-core product on codes (4 bits, or 8 as its MLPs' third
// projections and layer 0's first two are, bf16 scales, rows a multiple of 8 groups and of 256
// or 128 long): every product of its 1-, 8- and 40-token prompts, the tied LM head's too, takes
// that path, where the fixtures above are too narrow for it.
TEST(MlxQuantized, WideEnoughForTheTensorCores) {
  const int64_t hidden = 256, heads = 8, kv_heads = 2, head_dim = 64, inner = 768, layers = 2, vocab = 384;
  const std::string o_proj = "model.layers.1.self_attn.o_proj";  // K = 512: groups of 64 fit it
  const nlohmann::json eight = {{"group_size", 32}, {"bits", 8}};
  Pair pair("llama",
            {{"group_size", 32},
             {"bits", 4},
             {o_proj, {{"group_size", 64}, {"bits", 4}}},
             {"model.layers.0.mlp.gate_proj", eight},
             {"model.layers.0.mlp.up_proj", eight},
             {"model.layers.0.mlp.down_proj", eight},
             {"model.layers.1.mlp.down_proj", eight}},
            {{"hidden_size", hidden},
             {"num_attention_heads", heads},
             {"num_key_value_heads", kv_heads},
             {"head_dim", head_dim},
             {"intermediate_size", inner},
             {"num_hidden_layers", layers},
             {"vocab_size", vocab}});
  pair.add_weight("model.embed_tokens", vocab, hidden);
  for (int l = 0; l < layers; ++l) {
    const std::string at = "model.layers." + std::to_string(l) + ".";
    pair.add_norm(at + "input_layernorm.weight", hidden);
    pair.add_norm(at + "post_attention_layernorm.weight", hidden);
    pair.add_weight(at + "self_attn.q_proj", heads * head_dim, hidden);
    pair.add_weight(at + "self_attn.k_proj", kv_heads * head_dim, hidden);
    pair.add_weight(at + "self_attn.v_proj", kv_heads * head_dim, hidden);
    pair.add_weight(at + "self_attn.o_proj", hidden, heads * head_dim);
    pair.add_weight(at + "mlp.gate_proj", inner, hidden);
    pair.add_weight(at + "mlp.up_proj", inner, hidden);
    pair.add_weight(at + "mlp.down_proj", hidden, inner);
  }
  pair.add_norm("model.norm.weight", hidden);
  expect_same_model(pair);
}

// mlx-lm stacks a layer's experts per projection under switch_mlp ([experts, out, in]); its
// Qwen3-MoE routers are 8-bit.
TEST(MlxQuantized, StackedExperts) {
  const std::string router = "model.layers.0.mlp.gate";
  Pair pair("qwen3_moe", {{"group_size", 16}, {"bits", 4}, {router, {{"group_size", 16}, {"bits", 8}}}});
  const nlohmann::json& cfg = pair.config();
  const int64_t E = cfg.contains("num_experts") ? cfg["num_experts"].get<int64_t>()
                                                : cfg["num_local_experts"].get<int64_t>();
  WeightStore weights(pair.src());
  for (const std::string& name : weights.names()) {
    Tensor t = weights.get(name);
    if (name.find(".mlp.experts.") != std::string::npos) continue;
    const std::string layer = name.substr(0, name.size() - std::string(".weight").size());
    if (t.ndim() != 2) {
      pair.q.emplace_back(name, t), pair.p.emplace_back(name, t);
      continue;
    }
    Quantized x = pair.add(layer, t.dim(0), t.dim(1));
    pair.q.emplace_back(name, x.codes), pair.p.emplace_back(name, x.values);
  }
  int stacked = 0;
  for (int l = 0; weights.has("model.layers." + std::to_string(l) + ".input_layernorm.weight"); ++l) {
    const std::string mlp = "model.layers." + std::to_string(l) + ".mlp.";
    if (!weights.has(mlp + "experts.0.gate_proj.weight")) continue;
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      const Tensor one = weights.get(mlp + "experts.0." + proj + ".weight");
      const int64_t out = one.dim(0), in = one.dim(1);
      Quantized x = pair.add(mlp + "switch_mlp." + proj, E * out, in);
      pair.q.emplace_back(mlp + "switch_mlp." + proj + ".weight", x.codes.reshape({E, out, x.codes.dim(1)}));
      for (auto& [name, t] : pair.q)
        if (name == mlp + "switch_mlp." + proj + ".scales" || name == mlp + "switch_mlp." + proj + ".biases")
          t = t.reshape({E, out, t.dim(1)});
      for (int64_t e = 0; e < E; ++e)
        pair.p.emplace_back(mlp + "experts." + std::to_string(e) + "." + proj + ".weight",
                            x.values.slice_rows(e * out, (e + 1) * out));
    }
    ++stacked;
  }
  EXPECT_GT(stacked, 0);
  expect_same_model(pair);
}

}  // namespace
}  // namespace tessera::test

#include "random_llama.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"

namespace tessera::bench {
namespace {

constexpr int kHidden = 512, kLayers = 6, kHeads = 8, kKvHeads = 4, kHeadDim = 64, kFfn = 1408, kVocab = 4096;

}  // namespace

void write_random_llama(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}},
                        {"model_type", "llama"},
                        {"hidden_size", kHidden},
                        {"intermediate_size", kFfn},
                        {"num_hidden_layers", kLayers},
                        {"num_attention_heads", kHeads},
                        {"num_key_value_heads", kKvHeads},
                        {"head_dim", kHeadDim},
                        {"hidden_act", "silu"},
                        {"max_position_embeddings", 1024},
                        {"rms_norm_eps", 1e-5},
                        {"rope_theta", 10000.0},
                        {"tie_word_embeddings", true},
                        {"vocab_size", kVocab},
                        {"bos_token_id", 1},
                        {"eos_token_id", 2},
                        {"dtype", "float32"}};
  std::ofstream(dir / "config.json") << cfg.dump(2);

  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<std::pair<std::string, Tensor>> tensors;
  auto add = [&](const std::string& name, Shape shape, bool ones = false) {
    Tensor t = Tensor::empty(DType::F32, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = ones ? 1.0f : normal(rng);
    tensors.emplace_back(name, std::move(t));
  };
  add("model.embed_tokens.weight", {kVocab, kHidden});
  for (int l = 0; l < kLayers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {kHidden}, true);
    add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden});
    add(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden});
    add(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden});
    add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim});
    add(p + "post_attention_layernorm.weight", {kHidden}, true);
    add(p + "mlp.gate_proj.weight", {kFfn, kHidden});
    add(p + "mlp.up_proj.weight", {kFfn, kHidden});
    add(p + "mlp.down_proj.weight", {kHidden, kFfn});
  }
  add("model.norm.weight", {kHidden}, true);
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace tessera::bench

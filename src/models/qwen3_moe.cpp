// Qwen3-MoE: Qwen3's attention (per-head q/k norms) with a mixture of experts (nn::MoeMlp) in
// every decoder_sparse_step-th layer not listed in mlp_only_layers, the others dense.
#include <algorithm>

#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_qwen3_moe(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::llama_family_options(cfg);
  o.qkv_bias = o.o_bias = cfg.get_or<bool>("attention_bias", false);
  o.qk_norm = true;
  nn::MoeOptions& m = o.moe;
  m.num_experts = cfg.get_or<int>("num_experts", cfg.get_or<int>("num_local_experts", 0));  // hub / transformers 5
  m.top_k = cfg.get<int>("num_experts_per_tok");
  m.intermediate_size = cfg.get<int>("moe_intermediate_size");
  m.norm_topk_prob = cfg.get_or<bool>("norm_topk_prob", false);  // transformers' default
  const int step = cfg.get_or<int>("decoder_sparse_step", 1);
  TESSERA_CHECK(step > 0, "config.json: decoder_sparse_step must be positive");
  const auto dense = cfg.get_or<std::vector<int>>("mlp_only_layers", {});
  for (int l = 0; l < o.num_layers; ++l)
    m.sparse.push_back(m.num_experts > 0 && (l + 1) % step == 0 && std::count(dense.begin(), dense.end(), l) == 0);
  return std::make_unique<DecoderModel>(cfg, o, w, be);
}

}  // namespace tessera

// Mixtral: the Llama layout with a mixture of experts (nn::MoeMlp) in every layer, its top
// weights renormalised; the experts' gate, up and down are w1, w3 and w2 under block_sparse_moe.
#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_mixtral(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::llama_family_options(cfg);
  nn::MoeOptions& m = o.moe;
  m.num_experts = cfg.get<int>("num_local_experts");
  m.top_k = cfg.get<int>("num_experts_per_tok");
  m.intermediate_size = o.intermediate_size;
  m.norm_topk_prob = true;
  m.sparse.assign(size_t(o.num_layers), true);
  m.block = "block_sparse_moe";
  m.projections = {"w1", "w3", "w2"};
  return std::make_unique<DecoderModel>(cfg, o, w, be);
}

}  // namespace tessera

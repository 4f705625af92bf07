// Qwen3: per-head RMSNorm of q and k before RoPE, an explicit head_dim, optional attention_bias.
#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_qwen3(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::llama_family_options(cfg);
  o.qkv_bias = o.o_bias = cfg.get_or<bool>("attention_bias", false);
  o.qk_norm = true;
  return std::make_unique<DecoderModel>(cfg, o, w, be);
}

}  // namespace tessera

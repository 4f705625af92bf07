// Qwen2 / Qwen2.5: the Llama layout with biases on the q/k/v projections (not on o_proj).
#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_qwen2(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::llama_family_options(cfg);
  o.qkv_bias = true;
  return std::make_unique<DecoderModel>(cfg, o, w, be);
}

}  // namespace tessera

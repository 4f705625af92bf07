// Llama 2/3 (and Mistral, via the alias table): pre-norm decoder, GQA, SwiGLU; rope scaling
// (llama3, linear, dynamic, yarn) is read by nn::Rope. attention_bias adds biases to q/k/v/o.
#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_llama(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::llama_family_options(cfg);
  o.qkv_bias = o.o_bias = cfg.get_or<bool>("attention_bias", false);
  o.mlp_bias = cfg.get_or<bool>("mlp_bias", false);
  return std::make_unique<DecoderModel>(cfg, o, w, be);
}

}  // namespace tessera

// Gemma 2: the Gemma layout (gemma_family_options) with soft-capped attention scores and final
// logits, and sliding-window layers alternating with full ones.
#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_gemma2(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::gemma_family_options(cfg);
  // A cap the config leaves out is transformers' default; one set to null is off.
  auto cap = [&](const std::string& key, float fallback) {
    return cfg.raw().contains(key) ? cfg.get_or<float>(key, 0.0f) : fallback;
  };
  o.attn_softcap = cap("attn_logit_softcapping", 50.0f);
  o.final_softcap = cap("final_logit_softcapping", 30.0f);
  // Configs written before layer_types existed: even layers slide, odd ones see everything.
  if (!cfg.has("layer_types"))
    for (int l = 1; l < o.num_layers; l += 2) o.sliding_window[size_t(l)] = 0;
  return std::make_unique<DecoderModel>(cfg, o, w, be);
}

}  // namespace tessera

// Gemma 2: GeGLU MLP, norms that weigh by 1 + w before and after each sublayer, embeddings scaled
// by sqrt(hidden_size), attention scaled by query_pre_attn_scalar and soft-capped, sliding-window
// layers alternating with full ones, soft-capped final logits, tied embeddings.
#include <cmath>

#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_gemma2(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::llama_family_options(cfg);
  const std::string act =
      cfg.get_or<std::string>("hidden_activation", cfg.get_or<std::string>("hidden_act", ""));
  // gelu_new is the same tanh form under transformers' older name.
  TESSERA_CHECK(act == "gelu_pytorch_tanh" || act == "gelu_new",
                "gemma2: unsupported hidden_activation \"" + act + "\" (gelu_pytorch_tanh expected)");
  o.glu = Glu::GeGLU;
  o.norm_offset = 1.0f;
  o.scale_embeddings = true;
  o.sandwich_norms = true;
  o.tie_embeddings = cfg.get_or<bool>("tie_word_embeddings", true);
  o.attn_scale =
      1.0f / std::sqrt(cfg.get_or<float>("query_pre_attn_scalar", 256.0f));  // transformers' default
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

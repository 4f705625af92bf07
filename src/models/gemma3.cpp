// Gemma 3 (text, model_type gemma3_text): the Gemma layout (gemma_family_options) with q/k norms
// and no soft caps, five sliding-window layers to one full one, and RoPE of its own per layer
// type: transformers 5 writes both sets under rope_parameters; older configs give the full
// layers' rope_theta and rope_scaling and the sliding layers' rope_local_base_freq, rewritten
// here into that form.
#include "models/decoder_model.h"
#include "nn/rope.h"

namespace tessera {

std::unique_ptr<Model> make_gemma3(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::gemma_family_options(cfg);
  o.qk_norm = true;
  o.attn_softcap = cfg.get_or<float>("attn_logit_softcapping", 0.0f);
  o.final_softcap = cfg.get_or<float>("final_logit_softcapping", 0.0f);
  if (!cfg.has("layer_types")) {  // every sliding_window_pattern-th layer sees everything
    const int pattern =
        cfg.get_or<int>("sliding_window_pattern", cfg.get_or<int>("_sliding_window_pattern", 6));
    TESSERA_CHECK(pattern > 0,
                  "gemma3_text: sliding_window_pattern must be positive, got " + std::to_string(pattern));
    for (int l = 0; l < o.num_layers; ++l)
      if ((l + 1) % pattern == 0) o.sliding_window[size_t(l)] = 0;
  }
  if (nn::Rope::has_layer_type(cfg, "full_attention")) return std::make_unique<DecoderModel>(cfg, o, w, be);
  nlohmann::json raw = cfg.raw(), full = raw.contains("rope_scaling") && raw["rope_scaling"].is_object()
                                             ? raw["rope_scaling"]
                                             : nlohmann::json{{"rope_type", "default"}};
  full["rope_theta"] = cfg.get_or<double>("rope_theta", 1000000.0);
  raw["rope_parameters"] = {
      {"full_attention", full},
      {"sliding_attention",
       {{"rope_type", "default"}, {"rope_theta", cfg.get_or<double>("rope_local_base_freq", 10000.0)}}}};
  raw.erase("rope_scaling");
  return std::make_unique<DecoderModel>(HfConfig::from_json(raw, cfg.generation()), o, w, be);
}

}  // namespace tessera

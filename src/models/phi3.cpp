// Phi-3, Phi-3.5 and Phi-4 (model_type phi3): the Llama layout with q/k/v stacked in one
// qkv_proj and gate/up in one gate_up_proj (gate first), partial rotary (Phi-4-mini) and
// longrope scaling (nn::Rope) where the config gives them.
#include "models/decoder_model.h"

namespace tessera {

std::unique_ptr<Model> make_phi3(const HfConfig& cfg, const WeightStore& w, Backend& be) {
  nn::DecoderOptions o = nn::llama_family_options(cfg);
  o.fused_projections = true;
  const std::string act = cfg.get_or<std::string>("hidden_act", "silu");
  TESSERA_CHECK(act == "silu", "phi3: unsupported hidden_act \"" + act + "\" (silu expected)");
  return std::make_unique<DecoderModel>(cfg, o, w, be);
}

}  // namespace tessera

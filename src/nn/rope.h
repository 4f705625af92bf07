// Rotary position embedding frequencies from a Hugging Face config, for every rope_scaling type
// transformers defines for these models: default, linear, dynamic (NTK), yarn, llama3, longrope.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"

namespace tessera::nn {

class Rope {
 public:
  // head_dim: the attention head size; partial_rotary_factor is read from the config. layer_type:
  // the layers' type ("full_attention", "sliding_attention") where rope_parameters gives one set
  // per type (Gemma 3); otherwise the config's one set.
  Rope(const HfConfig& cfg, int head_dim, Backend& be, const std::string& layer_type = "");
  // Whether rope_parameters gives a set of its own for layer_type.
  static bool has_layer_type(const HfConfig& cfg, const std::string& layer_type);
  // Parameters for a step whose largest position is max_position (dynamic scaling depends on it,
  // as in transformers, which recomputes the frequencies when the sequence outgrows the original
  // context).
  const RopeParams& params(int max_position);
  int rotary_dim() const { return rotary_dim_; }
  // Whether params() changes with the step's positions (dynamic scaling, longrope).
  bool depends_on_length() const { return type_ == "dynamic" || type_ == "longrope"; }
  // The context the scaling is made for: max_position_embeddings, or the scaled length for
  // dynamic and yarn scaling (whose configs give the original length).
  static int scaled_context(const HfConfig& cfg);

 private:
  std::vector<float> default_inv_freq(double base, const std::vector<float>& factors = {}) const;
  RopeParams make_params(const std::vector<float>& inv_freq, float attention_scaling);

  Backend& be_;
  std::string type_ = "default";
  int rotary_dim_;
  double base_;
  double factor_ = 1;
  int original_max_ = 0;
  int cached_len_ = 0;  // dynamic: sequence length the current frequencies were made for
  RopeParams params_;
  RopeParams long_params_;  // longrope: past the original length
};

}  // namespace tessera::nn

#include "nn/rope.h"

#include <cmath>

namespace tessera::nn {

using nlohmann::json;

bool Rope::has_layer_type(const HfConfig& cfg, const std::string& layer_type) {
  return cfg.has("rope_parameters") && cfg.raw()["rope_parameters"].contains(layer_type) &&
         cfg.raw()["rope_parameters"][layer_type].is_object();
}

Rope::Rope(const HfConfig& cfg, int head_dim, Backend& be, const std::string& layer_type) : be_(be) {
  rotary_dim_ = int(head_dim * cfg.get_or<double>("partial_rotary_factor", 1.0));
  // transformers 5 keeps rope_theta and scaling under "rope_parameters" (one set per layer type
  // for Gemma 3); older configs at the top.
  const bool per_type = has_layer_type(cfg, layer_type);
  json rp = per_type ? cfg.raw()["rope_parameters"][layer_type]
            : cfg.has("rope_parameters") ? cfg.raw()["rope_parameters"]
                                         : json::object();
  json scaling = cfg.has("rope_scaling") && !per_type ? cfg.raw()["rope_scaling"] : rp;
  base_ = rp.value("rope_theta", cfg.get_or<double>("rope_theta", 10000.0));
  int max_pos = cfg.get_or<int>("max_position_embeddings", 2048);
  if (scaling.is_object()) {
    type_ = scaling.value("rope_type", scaling.value("type", std::string("default")));
    factor_ = scaling.value("factor", 1.0);
  }
  // Phi-3 keeps the pretrained length beside max_position_embeddings, at the top.
  const int top_original = cfg.get_or<int>("original_max_position_embeddings", max_pos);
  original_max_ = scaling.is_object() ? scaling.value("original_max_position_embeddings", top_original) : max_pos;

  std::vector<float> inv = default_inv_freq(base_);
  float attention_scaling = 1.0f;
  if (type_ == "default") {
  } else if (type_ == "linear") {
    for (float& f : inv) f = float(f / factor_);
  } else if (type_ == "dynamic") {
    original_max_ = max_pos;
    cached_len_ = max_pos;
  } else if (type_ == "llama3") {
    double low = scaling.value("low_freq_factor", 1.0), high = scaling.value("high_freq_factor", 4.0);
    double old_len = scaling.value("original_max_position_embeddings", 8192);
    double low_wavelen = old_len / low, high_wavelen = old_len / high;
    for (float& f : inv) {
      double wavelen = 2 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = float(f / factor_);
      } else if (wavelen >= high_wavelen) {  // between the two: interpolate smoothly
        double smooth = (old_len / wavelen - low) / (high - low);
        f = float((1 - smooth) * f / factor_ + smooth * f);
      }
    }
  } else if (type_ == "yarn") {
    auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    double mscale = scaling.value("mscale", 0.0), mscale_all = scaling.value("mscale_all_dim", 0.0);
    if (scaling.contains("attention_factor") && !scaling["attention_factor"].is_null())
      attention_scaling = scaling["attention_factor"].get<float>();
    else if (mscale != 0 && mscale_all != 0)
      attention_scaling = float(mscale_of(factor_, mscale) / mscale_of(factor_, mscale_all));
    else
      attention_scaling = float(mscale_of(factor_, 1.0));
    double beta_fast = scaling.value("beta_fast", 32.0), beta_slow = scaling.value("beta_slow", 1.0);
    bool truncate = scaling.value("truncate", true);
    int dim = rotary_dim_;
    auto correction_dim = [&](double rotations) {
      return dim * std::log(original_max_ / (rotations * 2 * M_PI)) / (2 * std::log(base_));
    };
    double lo = correction_dim(beta_fast), hi = correction_dim(beta_slow);
    if (truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0);
    hi = std::min(hi, double(dim - 1));
    if (lo == hi) hi += 0.001;
    for (size_t i = 0; i < inv.size(); ++i) {
      float ramp = std::clamp(float((float(i) - lo) / (hi - lo)), 0.0f, 1.0f);
      float extrapolation = 1.0f - ramp;
      float interp = float(1.0 / factor_) * inv[i];
      inv[i] = interp * (1 - extrapolation) + inv[i] * extrapolation;
    }
  } else if (type_ == "longrope" || type_ == "su") {
    // Phi-3's: each frequency divided by its factor, the short ones while the sequence fits the
    // pretrained length, the long ones past it; cos and sin scaled by attention_factor, by
    // default from max_position_embeddings over that length.
    type_ = "longrope";
    const double ratio = double(max_pos) / original_max_;
    attention_scaling = scaling.contains("attention_factor") && !scaling["attention_factor"].is_null()
                            ? scaling["attention_factor"].get<float>()
                        : ratio <= 1 ? 1.0f
                                     : float(std::sqrt(1 + std::log(ratio) / std::log(double(original_max_))));
    auto divided = [&](const char* key) {
      TESSERA_CHECK(scaling.contains(key) && scaling[key].is_array() && scaling[key].size() == inv.size(),
                    std::string("config.json: longrope needs ") + key + " of " + std::to_string(inv.size()) +
                        " numbers (rotary dimensions / 2)");
      return default_inv_freq(base_, scaling[key].get<std::vector<float>>());
    };
    long_params_ = make_params(divided("long_factor"), attention_scaling);
    inv = divided("short_factor");
  } else {
    throw Error("config.json: unsupported rope_scaling type \"" + type_ + "\"");
  }
  params_ = make_params(inv, attention_scaling);
}

int Rope::scaled_context(const HfConfig& cfg) {
  int max_pos = cfg.get_or<int>("max_position_embeddings", 2048);
  json scaling = cfg.has("rope_scaling") ? cfg.raw()["rope_scaling"]
                                         : cfg.has("rope_parameters") ? cfg.raw()["rope_parameters"] : json();
  if (!scaling.is_object()) return max_pos;
  std::string type = scaling.value("rope_type", scaling.value("type", std::string("default")));
  double factor = scaling.value("factor", 1.0);
  if (type == "dynamic") return int(max_pos * factor);
  if (type == "yarn") return std::max(max_pos, int(scaling.value("original_max_position_embeddings", max_pos) * factor));
  return max_pos;
}

// inv_freq[i] = 1 / (factors[i] * base^(2i / dim)), in f32 as transformers computes it; no
// factors: 1.
std::vector<float> Rope::default_inv_freq(double base, const std::vector<float>& factors) const {
  std::vector<float> inv(size_t(rotary_dim_ / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    float exponent = float(2 * i) / float(rotary_dim_);
    inv[i] = 1.0f / ((factors.empty() ? 1.0f : factors[i]) * std::pow(float(base), exponent));
  }
  return inv;
}

RopeParams Rope::make_params(const std::vector<float>& inv_freq, float attention_scaling) {
  Tensor host = Tensor::empty(DType::F32, {int64_t(inv_freq.size())});
  std::copy(inv_freq.begin(), inv_freq.end(), host.data<float>());
  RopeParams p;
  // upload() may return the host view (CPU); keep the storage alive through the tensor itself.
  p.inv_freq = be_.upload(host);
  p.attention_scaling = attention_scaling;
  p.rotary_dim = rotary_dim_;
  return p;
}

const RopeParams& Rope::params(int max_position) {
  // transformers: seq_len = max position + 1, against the pretrained length.
  if (type_ == "longrope") return max_position + 1 > original_max_ ? long_params_ : params_;
  if (type_ != "dynamic") return params_;
  // transformers: seq_len = max position + 1; grow beyond the original context, reset below it.
  int seq_len = max_position + 1;
  if (seq_len > cached_len_ || (seq_len < original_max_ && cached_len_ > original_max_)) {
    double base = base_;
    int len = std::max(seq_len, original_max_);
    if (seq_len > original_max_) {
      double d = rotary_dim_;
      base = base_ * std::pow(factor_ * len / original_max_ - (factor_ - 1), d / (d - 2));
    }
    params_ = make_params(default_inv_freq(base), 1.0f);
    cached_len_ = len;
  }
  return params_;
}

}  // namespace tessera::nn

// Checkpoints quantized by MLX (mlx-lm's convert, the mlx-community models): a quantized layer's
// weight is stored as bits-wide codes packed into uint32 words, with a scale and a bias per group
// of group_size inputs beside it (`<layer>.scales`, `<layer>.biases`). config.json's
// "quantization" gives bits and group_size, and may override them per layer by its path
// ("model.layers.0.mlp.down_proj": {"bits": 8, ...}, or false for a layer left unquantized).
// Weights are dequantized when loaded, to the scales' dtype.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace tessera {

struct MlxQuantization {
  struct Params {
    int bits = 0, group_size = 0;
  };
  Params all;
  std::map<std::string, std::optional<Params>> layers;  // per layer; nullopt: not quantized

  // From a config.json: the MLX quantization it names, or none. Throws tessera::Error for a
  // quantized checkpoint of another kind (GPTQ, AWQ, FP8, ...), or MLX modes and widths other
  // than affine 2, 3, 4, 5, 6 and 8 bits.
  static std::optional<MlxQuantization> from_config(const nlohmann::json& config);
  // The parameters of the layer at `path` (its weight's name without ".weight").
  std::optional<Params> of(const std::string& path) const;
};

// w[..., i] = scales[..., i / group_size] * q[..., i] + biases[..., i / group_size], where q[..., i]
// is bits [i * bits, (i + 1) * bits) of the row's words read as one little-endian bit stream (each
// word's lowest bit first).
// Computed in f32 and returned in the scales' dtype. Throws tessera::Error naming `layer` on
// shapes that do not fit.
Tensor mlx_dequantize(const Tensor& packed, const Tensor& scales, const Tensor& biases,
                      MlxQuantization::Params p, const std::string& layer);

}  // namespace tessera

// Checkpoints quantized by MLX (mlx-lm's convert, the mlx-community models): a quantized layer's
// weight is stored as bits-wide codes packed into uint32 words, with a scale and a bias per group
// of group_size inputs beside it (`<layer>.scales`, `<layer>.biases`). config.json's
// "quantization" gives bits and group_size, and may override them per layer by its path
// ("model.layers.0.mlp.down_proj": {"bits": 8, ...}, or false for a layer left unquantized).
// A backend that computes with quantized weights keeps them so (core/quantization.h); for the
// others they are dequantized when loaded, to the scales' dtype.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/quantization.h"
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

// The quantized weight (core/quantization.h) of a layer's codes as the checkpoint stores them
// (U32 [..., words]) with its scales and biases ([..., in / group_size], f32, f16 or bf16): a view,
// not a copy. Throws tessera::Error naming `layer` on shapes that do not fit.
Tensor mlx_quantized(const Tensor& packed, const Tensor& scales, const Tensor& biases,
                     MlxQuantization::Params p, const std::string& layer);

}  // namespace tessera

#include "io/mlx_quant.h"

#include "core/error.h"

namespace tessera {
namespace {

MlxQuantization::Params read_params(const nlohmann::json& q, const MlxQuantization::Params& fallback,
                                    const std::string& where) {
  MlxQuantization::Params p = fallback;
  auto number = [&](const char* key, int& out) {
    if (!q.contains(key)) return;
    TESSERA_CHECK(q[key].is_number_integer(), "config.json: " + where + "." + key + " must be an integer");
    out = q[key].get<int>();
  };
  number("bits", p.bits);
  number("group_size", p.group_size);
  const std::string mode =
      q.contains("mode") && q["mode"].is_string() ? q["mode"].get<std::string>() : "affine";
  TESSERA_CHECK(mode == "affine", "config.json: " + where + ": MLX quantization mode \"" + mode +
                                      "\" is not supported (affine is)");
  TESSERA_CHECK(p.bits >= 2 && p.bits <= 8 && p.bits != 7,
                "config.json: " + where + ": " + std::to_string(p.bits) +
                    "-bit MLX quantization is not supported (2, 3, 4, 5, 6 and 8 bits are)");
  TESSERA_CHECK(p.group_size > 0, "config.json: " + where + ": group_size must be positive");
  return p;
}

}  // namespace

std::optional<MlxQuantization> MlxQuantization::from_config(const nlohmann::json& config) {
  const nlohmann::json* q = config.contains("quantization") ? &config["quantization"] : nullptr;
  if (!q) {
    // mlx-lm writes its settings under both names; others write only quantization_config.
    if (!config.contains("quantization_config") || !config["quantization_config"].is_object())
      return std::nullopt;
    const nlohmann::json& qc = config["quantization_config"];
    if (qc.contains("quant_method") && qc["quant_method"].is_string())
      throw Error("config.json: checkpoints quantized with " + qc["quant_method"].get<std::string>() +
                  " are not supported (MLX's affine quantization and unquantized f32, f16 and bf16 are)");
    q = &qc;
  }
  TESSERA_CHECK(q->is_object(), "config.json: \"quantization\" must be an object");
  MlxQuantization out;
  out.all = read_params(*q, {}, "quantization");
  for (auto& [key, value] : q->items()) {
    if (value.is_object())
      out.layers[key] = read_params(value, out.all, "quantization." + key);
    else if (value.is_boolean() && !value.get<bool>())
      out.layers[key] = std::nullopt;
  }
  return out;
}

std::optional<MlxQuantization::Params> MlxQuantization::of(const std::string& path) const {
  auto it = layers.find(path);
  return it == layers.end() ? std::optional(all) : it->second;
}

Tensor mlx_quantized(const Tensor& packed, const Tensor& scales, const Tensor& biases,
                     MlxQuantization::Params p, const std::string& layer) {
  const std::string what = "quantized layer \"" + layer + "\"";
  TESSERA_CHECK(packed.dtype() == DType::U32,
                what + ": its weight is " + std::string(dtype_name(packed.dtype())) + ", expected U32 codes");
  const DType dt = scales.dtype();
  TESSERA_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
                what + ": scales must be f32, f16 or bf16");
  TESSERA_CHECK(biases.dtype() == dt, what + ": biases and scales differ in dtype");
  const Shape& ps = packed.shape();
  TESSERA_CHECK(!ps.empty(), what + ": the weight has no dimensions");
  const int64_t words = ps.back(), in = words * 32 / p.bits;
  // Widths that divide 32 fill whole words, and their groups are whole words; the others (3, 5 and
  // 6 bits) are one bit stream a row, as MLX packs them (8 or 4 codes in 3 or 5 bytes).
  const bool word_aligned = 32 % p.bits == 0;
  TESSERA_CHECK(words * 32 % p.bits == 0 && in % p.group_size == 0 &&
                    (!word_aligned || p.group_size % (32 / p.bits) == 0),
                what + ": " + std::to_string(words) + " words of " + std::to_string(p.bits) +
                    "-bit codes are not whole groups of " + std::to_string(p.group_size));
  Shape gs = ps, shape = ps;
  gs.back() = in / p.group_size;
  shape.back() = in;
  TESSERA_CHECK(scales.shape() == gs && biases.shape() == gs,
                what + ": scales and biases must have shape " + shape_str(gs) + " for " +
                    std::to_string(p.bits) + "-bit codes in groups of " + std::to_string(p.group_size) +
                    " (scales are " + shape_str(scales.shape()) + ", biases " + shape_str(biases.shape()) +
                    ")");
  return Tensor::quantized(packed, shape, {p.bits, p.group_size, scales, biases});
}

}  // namespace tessera

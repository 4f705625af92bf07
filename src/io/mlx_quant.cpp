#include "io/mlx_quant.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

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

float to_f32(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32:
      return t.data<float>()[i];
    case DType::BF16:
      return bf16_to_f32(t.data<uint16_t>()[i]);
    case DType::F16:
      return f16_to_f32(t.data<uint16_t>()[i]);
    default:
      return 0;  // checked by the caller
  }
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

Tensor mlx_dequantize(const Tensor& packed, const Tensor& scales, const Tensor& biases,
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
  Shape gs = ps, out_shape = ps;
  gs.back() = in / p.group_size;
  out_shape.back() = in;
  TESSERA_CHECK(scales.shape() == gs && biases.shape() == gs,
                what + ": scales and biases must have shape " + shape_str(gs) + " for " +
                    std::to_string(p.bits) + "-bit codes in groups of " + std::to_string(p.group_size) +
                    " (scales are " + shape_str(scales.shape()) + ", biases " + shape_str(biases.shape()) +
                    ")");

  Tensor out = Tensor::empty(dt, out_shape);
  const int64_t rows = shape_numel(ps) / words, groups = in / p.group_size;
  const uint32_t* q = packed.data<uint32_t>();
  const uint32_t mask = (1u << p.bits) - 1;
  const int per_word = 32 / p.bits;
  auto dequantize_rows = [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t r = begin; r < end; ++r) {
      const uint32_t* word = q + r * words;
      const auto* bytes = reinterpret_cast<const uint8_t*>(word);
      float* v = row.data();
      for (int64_t g = 0; g < groups; ++g) {
        const float s = to_f32(scales, r * groups + g), b = to_f32(biases, r * groups + g);
        if (word_aligned) {
          for (int64_t k = 0; k < p.group_size / per_word; ++k, ++word)
            for (int j = 0; j < per_word; ++j) *v++ = s * float(*word >> (j * p.bits) & mask) + b;
          continue;
        }
        for (int64_t i = g * p.group_size; i < (g + 1) * p.group_size; ++i) {
          const int64_t bit = i * p.bits, at = bit / 8;  // a code spans at most two bytes
          const uint32_t two = bytes[at] | (at + 1 < words * 4 ? uint32_t(bytes[at + 1]) << 8 : 0u);
          *v++ = s * float(two >> (bit % 8) & mask) + b;
        }
      }
      if (dt == DType::F32) {
        std::memcpy(out.data<float>() + r * in, row.data(), row.size() * sizeof(float));
      } else if (dt == DType::BF16) {
        uint16_t* o = out.data<uint16_t>() + r * in;
        for (int64_t i = 0; i < in; ++i) o[i] = f32_to_bf16(row[size_t(i)]);
      } else {
        uint16_t* o = out.data<uint16_t>() + r * in;
        for (int64_t i = 0; i < in; ++i) o[i] = f32_to_f16(row[size_t(i)]);
      }
    }
  };
  // A large model's layers take seconds on one core: rows split over the machine's threads.
  const int64_t threads =
      std::clamp<int64_t>(out.numel() >> 20, 1, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back(dequantize_rows, rows * t / threads, rows * (t + 1) / threads);
  dequantize_rows(0, rows / threads);
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace tessera

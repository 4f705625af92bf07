// safetensors files: mmapped, validated, and viewed as Tensors without copying.
// A model's weights are a WeightStore over one file or over the shards of a
// model.safetensors.index.json.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/mlx_quant.h"

namespace tessera {

// One mmapped safetensors file. Throws tessera::Error naming the file on any malformation
// (short file, bad header, overlapping or out-of-bounds data offsets, unknown dtype).
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  Tensor get(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    DType dtype;
    Shape shape;
    size_t begin, end;  // byte range inside the data section
  };
  std::filesystem::path path_;
  std::shared_ptr<void> mapping_;  // unmaps when the last tensor view is gone
  const char* data_ = nullptr;
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory: model.safetensors, or the shards listed in
// model.safetensors.index.json.
class WeightStore {
 public:
  explicit WeightStore(const std::filesystem::path& model_dir);
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  // A layer's weight. With MLX quantization set, a quantized layer's weight is a quantized tensor
  // (core/quantization.h, a view) where the quantization is kept, else its values (a copy).
  Tensor get(const std::string& name) const;
  // The tensor as the file holds it (a view, never dequantized).
  Tensor stored(const std::string& name) const;
  // keep: the backend computes with quantized weights (Backend::holds_quantized).
  void set_quantization(MlxQuantization q, bool keep) { quant_ = std::move(q), keep_quantized_ = keep; }
  bool quantized() const { return quant_.has_value(); }
  // Whether get() returns quantized layers as codes (set_quantization's keep).
  bool keeps_quantized() const { return quant_.has_value() && keep_quantized_; }
  // As get(), and checks the shape; the error names the tensor and both shapes.
  Tensor get(const std::string& name, const Shape& expected) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;
  // The bytes of the weights with every quantized layer widened to its scales' dtype (as get()
  // returns them where the quantization is not kept), its scales and biases inside them.
  size_t widened_bytes() const;

 private:
  // "L" for a name "L.weight" stored with "L.scales" beside it (a quantized layer), else nullopt.
  std::optional<std::string> quantized_layer(const std::string& name) const;

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
  std::optional<MlxQuantization> quant_;
  bool keep_quantized_ = false;
};

// Writes tensors (host memory) to a safetensors file, in the given order.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tessera

// A loaded model: one forward over a flat batch, and the shape of the KV cache it needs.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "nn/forward_batch.h"

namespace tessera {

class Model {
 public:
  virtual ~Model() = default;
  // logits: [fb.num_logits, vocab_size()] f32 in backend memory.
  virtual Tensor forward(const ForwardBatch& fb, KvCache& cache) = 0;
  virtual KvCacheSpec kv_spec() const = 0;
  virtual int vocab_size() const = 0;
  virtual int max_context() const = 0;
  // Whether forward() issues the same ops on the same tensors for every batch of one shape (no
  // state that changes with positions, such as dynamic rope scaling), nor waits for the device,
  // for batches of up to max_tokens tokens, so that a backend's recording of it can stand for
  // later steps of that shape (Backend::record).
  virtual bool replayable(int /*max_tokens*/) const { return false; }
};

using ModelFactory = std::function<std::unique_ptr<Model>(const HfConfig&, const WeightStore&, Backend&)>;

// Everything a loaded model directory provides to the engine.
struct LoadedModel {
  HfConfig config;
  std::unique_ptr<WeightStore> weights;  // the mmapped files the model's tensors view
  std::unique_ptr<Model> model;
  std::string architecture;              // registry key that built it
};

// Loads a Hugging Face model directory: config.json's model_type picks the architecture.
// keep_quantized: an MLX-quantized checkpoint's layers stay codes where the backend computes with
// them (Backend::holds_quantized); false dequantizes them to their scales' dtype as they load.
LoadedModel load_model(const std::filesystem::path& dir, Backend& be, bool keep_quantized = true);
// An MLX-quantized checkpoint's weights widened to their scales' dtype, in bytes, where that is
// more than 90% of free_bytes (a GPU then keeps the codes rather than fail, or leave no room for
// the KV cache); nullopt where it is not, and for checkpoints that are not quantized.
std::optional<size_t> widened_past(const std::filesystem::path& dir, size_t free_bytes);
// Registry of architectures (models/registry.cpp); aliases map e.g. mistral -> llama.
const ModelFactory* find_architecture(const std::string& model_type, std::string* resolved = nullptr);
std::vector<std::string> supported_architectures();

}  // namespace tessera

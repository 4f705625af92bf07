// What the subcommands that run a model share: model/threads flags, sampling flags with the
// model's generation_config.json defaults, and loading a model with its backend.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "engine/sampler.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace tessera::app {

struct ModelOptions {
  std::string model_dir;
  std::string device = "auto";  // cpu, cuda, cuda:N, or auto (a GPU when the CUDA backend loads)
  int threads = 0;
  int max_model_len = 0;
  std::string kv_cache_dtype = "auto";  // auto, f32, bf16, f16
  bool enforce_eager = false;           // no CUDA graphs: every step's ops launched one by one
  bool keep_quantized = false;          // a GPU keeps MLX codes instead of widening them at load

  // --model, or the bundled model's directory when it is not given.
  std::string dir() const;
};
void add_model_options(CLI::App& app, ModelOptions& o);

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  float presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
};
void add_sampling_flags(CLI::App& app, SamplingFlags& f);
// Flags given on the command line win; the rest come from generation_config.json (greedy
// unless it sets do_sample).
SamplingParams sampling_params(const SamplingFlags& f, const HfConfig& cfg);

struct LoadedRuntime {
  std::unique_ptr<Backend> backend;
  LoadedModel loaded;
  std::optional<Tokenizer> tokenizer;  // absent when the directory has no tokenizer.json
  std::vector<int32_t> eos_ids;        // generation_config / config / tokenizer_config EOS ids
  DType kv_cache_dtype = DType::F32;   // --kv-cache-dtype with auto resolved for this model
  double load_seconds = 0;             // reading the weights and building the model on the backend
  size_t weight_bytes = 0;

  // "weights: 16.06 GB uploaded in 1.52 s (10.6 GB/s) to cuda:0 (...)", for the log.
  std::string load_summary() const;

  // The tokenizer, or an error telling the user that this model directory has none.
  const Tokenizer& require_tokenizer() const;
  // A plain-text prompt as transformers feeds it: the post-processor's special tokens, and a BOS
  // when tokenizer_config.json asks for one that the post-processor does not add.
  std::vector<int32_t> encode_prompt(const std::string& text) const;
  std::vector<int32_t> encode_text(const std::string& text, bool add_special_tokens) const;
};
LoadedRuntime load_runtime(const ModelOptions& o);

// The KV cache dtype for a --kv-cache-dtype value. auto is vLLM's rule: the weights' dtype when
// they are 16-bit (the dtype holding most of their bytes), else f32, so f32 checkpoints stay exact.
DType resolve_kv_cache_dtype(const std::string& flag, const WeightStore& weights, Device device);

}  // namespace tessera::app

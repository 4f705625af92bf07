// A Model that is exactly an nn::Decoder: what the Llama-family files build.
#pragma once
#include "models/model.h"
#include "nn/decoder.h"

namespace tessera {

class DecoderModel final : public Model {
 public:
  DecoderModel(const HfConfig& cfg, const nn::DecoderOptions& opts, const WeightStore& w, Backend& be)
      : decoder_(cfg, opts, w, be), max_context_(nn::Rope::scaled_context(cfg)) {}
  Tensor forward(const ForwardBatch& fb, KvCache& cache) override { return decoder_.forward(fb, cache); }
  KvCacheSpec kv_spec() const override { return decoder_.kv_spec(); }
  int vocab_size() const override { return decoder_.options().vocab_size; }
  int max_context() const override { return max_context_; }
  bool replayable(int max_tokens) const override { return decoder_.replayable(max_tokens); }

 private:
  nn::Decoder decoder_;
  int max_context_;
};

}  // namespace tessera

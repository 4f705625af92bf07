// The pre-norm decoder-only transformer shared by the Llama family (llama, mistral, qwen2, qwen3,
// phi3), Gemma 2 and 3, and the mixtures of experts (qwen3_moe, mixtral): embeddings, N x [RMSNorm
// -> attention (GQA, RoPE, paged KV) -> residual -> RMSNorm -> gated MLP or experts -> residual],
// final norm, LM head. Architectures differ only in the options below; each model file turns its
// config into these options.
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "nn/forward_batch.h"
#include "nn/moe.h"
#include "nn/rope.h"

namespace tessera::nn {

struct DecoderOptions {
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  float rms_norm_eps = 1e-6f;
  bool qkv_bias = false;     // qwen2: biases on q/k/v projections
  bool o_bias = false;       // llama's attention_bias also covers o_proj
  bool mlp_bias = false;
  bool qk_norm = false;      // qwen3: RMSNorm over each head of q and k before RoPE
  bool tie_embeddings = false;
  bool fused_projections = false;  // phi3: q/k/v stacked in one qkv_proj, gate/up in one gate_up_proj
  std::vector<int> sliding_window;  // per layer; 0 = full attention
  // Gemma's departures from Llama:
  Glu glu = Glu::SwiGLU;          // GeGLU
  float norm_offset = 0.0f;       // 1: every norm weighs by 1 + w
  bool scale_embeddings = false;  // embeddings times sqrt(hidden_size), rounded to their dtype
  // Each sublayer's output normed before its residual add (post_attention_layernorm,
  // post_feedforward_layernorm); the MLP's input then by pre_feedforward_layernorm.
  bool sandwich_norms = false;
  float attn_scale = 0.0f;     // scores' scale; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;   // 0: none; else scores = cap * tanh(scores / cap)
  float final_softcap = 0.0f;  // the same on the logits
  MoeOptions moe;              // layers whose MLP is a mixture of experts (qwen3_moe, mixtral)
};

// Reads the fields every Llama-family config shares (hidden_size, heads, head_dim, ...).
DecoderOptions llama_family_options(const HfConfig& cfg);
// Those, with what Gemma 2 and 3 share: GeGLU, 1 + w norms around each sublayer, embeddings
// scaled by sqrt(hidden_size), attention scaled by query_pre_attn_scalar, tied embeddings.
DecoderOptions gemma_family_options(const HfConfig& cfg);

class Decoder {
 public:
  Decoder(const HfConfig& cfg, const DecoderOptions& opts, const WeightStore& weights, Backend& be);
  // logits: [fb.num_logits, vocab] f32 in backend memory.
  Tensor forward(const ForwardBatch& fb, KvCache& cache);
  KvCacheSpec kv_spec() const { return {opts_.num_layers, opts_.num_kv_heads, opts_.head_dim}; }
  const DecoderOptions& options() const { return opts_; }
  // forward() runs the same ops over the same inputs' memory at every step of one shape of up
  // to max_tokens tokens, without waiting for the device.
  bool replayable(int max_tokens) const {
    const bool experts = std::all_of(layers_.begin(), layers_.end(),
                                     [&](const Layer& L) { return !L.moe || L.moe->recordable(max_tokens); });
    return experts && !rope_.depends_on_length() && !(sliding_rope_ && sliding_rope_->depends_on_length());
  }

 private:
  struct Linear {
    Tensor weight, bias;
  };
  struct Layer {
    Tensor input_layernorm, post_attention_layernorm, q_norm, k_norm;
    Tensor pre_feedforward_layernorm, post_feedforward_layernorm;  // sandwich_norms
    Linear q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
    std::unique_ptr<MoeMlp> moe;  // in place of gate/up/down where the layer has experts
  };
  Linear load_linear(const WeightStore& w, const std::string& name, int out, int in, bool bias);
  // Projections of one input (q/k/v, gate/up), uploaded together so the backend may stack them.
  struct GroupPart {
    Linear* linear;
    std::string name;
    int out;
  };
  void load_group(const WeightStore& w, std::initializer_list<GroupPart> parts, int in, bool bias);
  // The same parts stacked in one checkpoint tensor `name` (their names unused), without biases.
  void load_fused(const WeightStore& w, const std::string& name, std::initializer_list<GroupPart> parts, int in);
  Tensor load(const WeightStore& w, const std::string& name, const Shape& shape);
  // Where the backend's products normalise their own input (Backend::normalises_inputs): each
  // layer's two norm weights folded into q/k/v and gate/up, the norms then of unit weight.
  void fold_norms();
  void linear(const Tensor& x, const Linear& l, Tensor& out) { be_.linear(x, l.weight, l.bias, out); }

  DecoderOptions opts_;
  Backend& be_;
  Rope rope_;
  std::optional<Rope> sliding_rope_;  // the sliding-window layers' own, where the config gives one
  Tensor embed_tokens, norm, lm_head;
  float embed_scale_ = 1.0f;
  std::vector<Layer> layers_;
  DType products_dtype_ = DType::F32;  // the layers' projections' dtype where they share one
  Tensor unit_norm_;                   // defined once fold_norms() has folded the layers' norms
};

}  // namespace tessera::nn

#include "nn/decoder.h"

#include <cmath>

#include "core/quantization.h"

namespace tessera::nn {

DecoderOptions llama_family_options(const HfConfig& cfg) {
  DecoderOptions o;
  o.hidden_size = cfg.get<int>("hidden_size");
  o.intermediate_size = cfg.get<int>("intermediate_size");
  o.num_layers = cfg.get<int>("num_hidden_layers");
  o.num_heads = cfg.get<int>("num_attention_heads");
  o.num_kv_heads = cfg.get_or<int>("num_key_value_heads", o.num_heads);
  TESSERA_CHECK(o.num_heads > 0 && o.num_kv_heads > 0 && o.num_heads % o.num_kv_heads == 0,
                "config.json: num_attention_heads must be a positive multiple of num_key_value_heads");
  o.head_dim = cfg.get_or<int>("head_dim", o.hidden_size / o.num_heads);
  o.vocab_size = cfg.get<int>("vocab_size");
  o.rms_norm_eps = cfg.get_or<float>("rms_norm_eps", 1e-6f);
  o.tie_embeddings = cfg.get_or<bool>("tie_word_embeddings", false);
  // Sliding-window attention: per layer from "layer_types" when given, else on every layer
  // when the config sets a window (mistral), unless use_sliding_window says otherwise (qwen).
  int window = cfg.get_or<int>("sliding_window", 0);
  if (!cfg.get_or<bool>("use_sliding_window", true)) window = 0;
  o.sliding_window.assign(size_t(o.num_layers), window);
  if (cfg.has("layer_types")) {
    auto types = cfg.get<std::vector<std::string>>("layer_types");
    TESSERA_CHECK(int(types.size()) == o.num_layers, "config.json: layer_types has the wrong length");
    for (int l = 0; l < o.num_layers; ++l) o.sliding_window[l] = types[l] == "sliding_attention" ? window : 0;
  }
  return o;
}

DecoderOptions gemma_family_options(const HfConfig& cfg) {
  DecoderOptions o = llama_family_options(cfg);
  const std::string act =
      cfg.get_or<std::string>("hidden_activation", cfg.get_or<std::string>("hidden_act", ""));
  // gelu_new is the same tanh form under transformers' older name.
  const std::string why = ": unsupported hidden_activation \"" + act + "\" (gelu_pytorch_tanh expected)";
  TESSERA_CHECK(act == "gelu_pytorch_tanh" || act == "gelu_new", cfg.model_type() + why);
  o.glu = Glu::GeGLU;
  o.norm_offset = 1.0f;
  o.scale_embeddings = true;
  o.sandwich_norms = true;
  o.tie_embeddings = cfg.get_or<bool>("tie_word_embeddings", true);
  o.attn_scale = 1.0f / std::sqrt(cfg.get_or<float>("query_pre_attn_scalar", 256.0f));  // transformers' default
  return o;
}

Decoder::Decoder(const HfConfig& cfg, const DecoderOptions& opts, const WeightStore& w, Backend& be)
    : opts_(opts), be_(be), rope_(cfg, opts.head_dim, be, "full_attention") {
  if (Rope::has_layer_type(cfg, "sliding_attention")) sliding_rope_.emplace(cfg, opts.head_dim, be, "sliding_attention");
  const int H = opts.hidden_size, Dh = opts.head_dim, I = opts.intermediate_size;
  embed_tokens = load(w, "model.embed_tokens.weight", {opts.vocab_size, H});
  norm = load(w, "model.norm.weight", {H});
  // Tied checkpoints usually omit lm_head; some keep a copy, which is then the same matrix.
  lm_head = opts.tie_embeddings && !w.has("lm_head.weight") ? embed_tokens
                                                             : load(w, "lm_head.weight", {opts.vocab_size, H});
  if (opts.scale_embeddings) {  // as transformers multiplies: sqrt(H) as a number of the embeddings' dtype
    const float s = std::sqrt(float(H));
    const DType dt = value_dtype(embed_tokens);
    embed_scale_ = dt == DType::BF16  ? bf16_to_f32(f32_to_bf16(s))
                   : dt == DType::F16 ? f16_to_f32(f32_to_f16(s))
                                      : s;
  }
  for (int l = 0; l < opts.num_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Layer L;
    L.input_layernorm = load(w, p + "input_layernorm.weight", {H});
    L.post_attention_layernorm = load(w, p + "post_attention_layernorm.weight", {H});
    if (opts.sandwich_norms) {
      L.pre_feedforward_layernorm = load(w, p + "pre_feedforward_layernorm.weight", {H});
      L.post_feedforward_layernorm = load(w, p + "post_feedforward_layernorm.weight", {H});
    }
    const std::initializer_list<GroupPart> qkv = {{&L.q_proj, p + "self_attn.q_proj", opts.num_heads * Dh},
                                                  {&L.k_proj, p + "self_attn.k_proj", opts.num_kv_heads * Dh},
                                                  {&L.v_proj, p + "self_attn.v_proj", opts.num_kv_heads * Dh}};
    const std::initializer_list<GroupPart> gate_up = {{&L.gate_proj, p + "mlp.gate_proj", I},
                                                      {&L.up_proj, p + "mlp.up_proj", I}};
    if (opts.fused_projections) load_fused(w, p + "self_attn.qkv_proj", qkv, H);
    else load_group(w, qkv, H, opts.qkv_bias);
    L.o_proj = load_linear(w, p + "self_attn.o_proj", H, opts.num_heads * Dh, opts.o_bias);
    if (opts.qk_norm) {
      L.q_norm = load(w, p + "self_attn.q_norm.weight", {Dh});
      L.k_norm = load(w, p + "self_attn.k_norm.weight", {Dh});
    }
    if (!opts.moe.sparse.empty() && opts.moe.sparse[size_t(l)]) {
      TESSERA_CHECK(!opts.sandwich_norms, "a mixture of experts with sandwich norms is not supported");
      L.moe = std::make_unique<MoeMlp>(w, be, p, opts.moe, H, opts.glu);
    } else {
      if (opts.fused_projections) load_fused(w, p + "mlp.gate_up_proj", gate_up, H);
      else load_group(w, gate_up, H, opts.mlp_bias);
      L.down_proj = load_linear(w, p + "mlp.down_proj", H, I, opts.mlp_bias);
    }
    layers_.push_back(std::move(L));
  }
  // The dtype of the layers' products, which their inputs may take (linear_input_dtype): the
  // first layer's MLP's (f32 where it has experts, whose input is f32), or f32 where some product
  // differs (mlx-lm's mixed quantization may leave an f32 layer among bf16 ones).
  if (!layers_.empty() && layers_[0].down_proj.weight.defined())
    products_dtype_ = layers_[0].down_proj.weight.dtype();
  for (const Layer& L : layers_)
    for (const Linear* l :
         {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj})
      if (l->weight.defined() && l->weight.dtype() != products_dtype_) products_dtype_ = DType::F32;
  fold_norms();
}

void Decoder::fold_norms() {
  if (!be_.normalises_inputs(1) || opts_.sandwich_norms || layers_.empty()) return;
  for (const Layer& L : layers_)
    for (const Linear* l : {&L.q_proj, &L.k_proj, &L.v_proj, &L.gate_proj, &L.up_proj})
      if (L.moe || !l->weight.defined() || l->weight.quantization()) return;
  // The norms' unit weight: 1 - offset, so that (weight + offset) is 1.
  const Tensor& w0 = layers_[0].input_layernorm;
  Tensor unit = Tensor::empty(DType::F32, {w0.numel()});
  std::fill_n(unit.data<float>(), unit.numel(), 1.0f - opts_.norm_offset);
  unit_norm_ = be_.upload(unit);
  for (Layer& L : layers_) {
    for (Linear* l : {&L.q_proj, &L.k_proj, &L.v_proj})
      be_.fold_norm_weight(l->weight, L.input_layernorm, opts_.norm_offset);
    for (Linear* l : {&L.gate_proj, &L.up_proj})
      be_.fold_norm_weight(l->weight, L.post_attention_layernorm, opts_.norm_offset);
    L.input_layernorm = L.post_attention_layernorm = unit_norm_;
  }
}

Tensor Decoder::load(const WeightStore& w, const std::string& name, const Shape& shape) {
  return be_.upload(w.get(name, shape));
}

Decoder::Linear Decoder::load_linear(const WeightStore& w, const std::string& name, int out, int in, bool bias) {
  Linear l;
  l.weight = load(w, name + ".weight", {out, in});
  if (bias) l.bias = load(w, name + ".bias", {out});
  return l;
}

void Decoder::load_group(const WeightStore& w, std::initializer_list<GroupPart> parts, int in, bool bias) {
  std::vector<Tensor> host;
  for (const GroupPart& p : parts) host.push_back(w.get(p.name + ".weight", {p.out, in}));
  std::vector<Tensor> dev = be_.upload_group(host);
  size_t i = 0;
  for (const GroupPart& p : parts) {
    p.linear->weight = dev[i++];
    if (bias) p.linear->bias = load(w, p.name + ".bias", {p.out});
  }
}

void Decoder::load_fused(const WeightStore& w, const std::string& name, std::initializer_list<GroupPart> parts,
                         int in) {
  int64_t rows = 0;
  for (const GroupPart& p : parts) rows += p.out;
  const Tensor whole = w.get(name + ".weight", {rows, in});
  std::vector<Tensor> host;
  rows = 0;
  for (const GroupPart& p : parts) host.push_back(whole.slice_rows(rows, rows + p.out)), rows += p.out;
  std::vector<Tensor> dev = be_.upload_group(host);
  size_t i = 0;
  for (const GroupPart& p : parts) p.linear->weight = dev[i++];
}

Tensor Decoder::forward(const ForwardBatch& fb, KvCache& cache) {
  const int64_t T = fb.num_tokens, H = opts_.hidden_size, Dh = opts_.head_dim;
  const int64_t nq = opts_.num_heads, nkv = opts_.num_kv_heads, I = opts_.intermediate_size;
  const RopeParams& full_rope = rope_.params(fb.max_position);
  const RopeParams& sliding_rope = sliding_rope_ ? sliding_rope_->params(fb.max_position) : full_rope;

  // Tensors that only feed products (h, attn, gate, up) in the backend's preferred input dtype.
  const DType act = be_.linear_input_dtype(products_dtype_, T);
  // x: [T, H] residual stream (f32); h: normed input of a sublayer; d: a sublayer's output
  Tensor x = be_.empty(DType::F32, {T, H}), h = be_.empty(act, {T, H});
  Tensor d = act == DType::F32 ? h : be_.empty(DType::F32, {T, H});
  Tensor q = be_.empty(DType::F32, {T, nq, Dh}), k = be_.empty(DType::F32, {T, nkv, Dh});
  Tensor v = be_.empty(DType::F32, {T, nkv, Dh}), attn = be_.empty(act, {T, nq, Dh});
  Tensor gate = be_.empty(act, {T, I}), up = be_.empty(act, {T, I});
  Tensor q2 = q.reshape({T, nq * Dh}), k2 = k.reshape({T, nkv * Dh}), v2 = v.reshape({T, nkv * Dh});
  Tensor attn2 = attn.reshape({T, nq * Dh});

  // Each sublayer's residual add is fused with the norm that follows it (the next sublayer's,
  // or the final norm after the last layer), and, without sandwich norms, with the sublayer's
  // output product (linear_add_rms_norm).
  // The final norm's output feeds the LM head's few rows: f32 (see linear_input_dtype).
  Tensor normed = act == DType::F32 ? h : be_.empty(DType::F32, {T, H});
  // The experts' input: f32 (Backend::moe_experts).
  Tensor moe_in = act == DType::F32 || opts_.moe.num_experts == 0 ? h : be_.empty(DType::F32, {T, H});
  const float eps = opts_.rms_norm_eps, off = opts_.norm_offset;
  be_.embedding(embed_tokens, fb.token_ids, embed_scale_, x);
  // With the norms folded (fold_norms) and products that normalise their input at this many
  // tokens, those products read x itself and the output products add into it: no norm runs
  // between them.
  const bool normed_products = unit_norm_.defined() && be_.normalises_inputs(T);
  const Backend::UnitNorm unit{unit_norm_, eps, off};
  if (!normed_products) be_.rms_norm(x, layers_.empty() ? norm : layers_[0].input_layernorm, eps, off, h);
  for (int l = 0; l < opts_.num_layers; ++l) {
    Layer& L = layers_[l];
    const RopeParams& rope = opts_.sliding_window[l] > 0 ? sliding_rope : full_rope;
    const LinearPart qp{L.q_proj.weight, L.q_proj.bias, q2}, kp{L.k_proj.weight, L.k_proj.bias, k2},
        vp{L.v_proj.weight, L.v_proj.bias, v2};
    const QkNorm qk_norm{L.q_norm, L.k_norm, eps, off};  // q and k normalised per head before rope
    if (normed_products)
      be_.normed_rope_store_kv(x, unit, qp, kp, vp, fb.attn.positions, rope, fb.slot_mapping, cache.k[l],
                               cache.v[l], opts_.qk_norm ? &qk_norm : nullptr);
    else
      be_.linear_rope_store_kv(h, qp, kp, vp, fb.attn.positions, rope, fb.slot_mapping, cache.k[l],
                               cache.v[l], opts_.qk_norm ? &qk_norm : nullptr);
    const float scale = opts_.attn_scale > 0.0f ? opts_.attn_scale : 1.0f / std::sqrt(float(Dh));
    be_.attention(q, cache.k[l], cache.v[l], fb.attn, {scale, opts_.sliding_window[l], opts_.attn_softcap}, attn);
    const bool last = l + 1 == opts_.num_layers;
    const Tensor& next_norm = last ? norm : layers_[l + 1].input_layernorm;
    Tensor& next_in = last ? normed : h;
    if (L.moe) {  // x += the experts' weighted outputs, then the next norm
      be_.linear_add_rms_norm(attn2, {L.o_proj.weight, L.o_proj.bias, d}, x, L.post_attention_layernorm, eps, off,
                              moe_in);
      L.moe->add_to(moe_in, x);
      be_.rms_norm(x, next_norm, eps, off, next_in);
      continue;
    }
    if (opts_.sandwich_norms) {  // the output normed before its residual add
      linear(attn2, L.o_proj, d);
      be_.rms_norm(d, L.post_attention_layernorm, eps, off, d);
      be_.add_rms_norm(x, d, L.pre_feedforward_layernorm, eps, off, h);
    } else if (normed_products) {
      be_.linear_add(attn2, {L.o_proj.weight, L.o_proj.bias, d}, x);
    } else {
      be_.linear_add_rms_norm(attn2, {L.o_proj.weight, L.o_proj.bias, d}, x, L.post_attention_layernorm, eps, off, h);
    }

    // gate = act(h · gate_projᵀ) * (h · up_projᵀ); up is scratch
    const LinearPart gp{L.gate_proj.weight, L.gate_proj.bias, gate},
        up_p{L.up_proj.weight, L.up_proj.bias, up};
    if (normed_products)
      be_.normed_glu(opts_.glu, x, unit, gp, up_p, gate);
    else
      be_.linear_glu(opts_.glu, h, gp, up_p, gate);
    if (opts_.sandwich_norms) {
      linear(gate, L.down_proj, d);
      be_.rms_norm(d, L.post_feedforward_layernorm, eps, off, d);
      be_.add_rms_norm(x, d, next_norm, eps, off, next_in);
    } else if (normed_products) {
      be_.linear_add(gate, {L.down_proj.weight, L.down_proj.bias, d}, x);
      if (last) be_.rms_norm(x, norm, eps, off, normed);
    } else {
      be_.linear_add_rms_norm(gate, {L.down_proj.weight, L.down_proj.bias, d}, x, next_norm, eps, off, next_in);
    }
  }
  Tensor rows = be_.empty(DType::F32, {fb.num_logits, H});
  be_.gather_rows(normed, fb.logits_rows, rows);
  Tensor logits = be_.empty(DType::F32, {fb.num_logits, opts_.vocab_size});
  be_.linear(rows, lm_head, Tensor(), logits);
  if (opts_.final_softcap > 0.0f) be_.softcap(logits, opts_.final_softcap);
  return logits;
}

}  // namespace tessera::nn

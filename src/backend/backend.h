// The op set every model is written in, and the interface each backend (cpu/, cuda/) implements.
// Models never see SIMD or CUDA: they allocate activations with empty() and call these ops.
// Weights may be f32, f16 or bf16 (converted inside the op). Activations are f32, except where a
// backend's products are faster on 16-bit inputs (linear_input_dtype()): then the tensors that
// only feed linear() (norm outputs, the MLP's gate/up and its glu) may be in the weights'
// 16-bit dtype, and the ops that read or write them (rms_norm's and add_rms_norm's out, linear's
// x and out, glu, linear_glu) take f32, bf16 or f16, computing in f32 and rounding once
// on output.
// Every op writes into a caller-provided `out` of the documented shape.
#pragma once
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace tessera {

// Per-step attention metadata, as backend tensors (i32). Built once per step by the runner.
struct AttentionMeta {
  Tensor seq_starts;    // [S+1] offsets of each sequence's new tokens in the flat batch
  Tensor context_lens;  // [S]   tokens in the sequence's cache after this step (computed + new)
  Tensor block_tables;  // [S, max_blocks] KV block ids of each sequence
  Tensor positions;     // [T]   absolute position of each new token
  int num_seqs = 0;
  int max_blocks = 0;
  int block_size = 0;
  int max_query_len = 0;
  int max_context_len = 0;
};

struct AttentionParams {
  float scale = 1.0f;       // applied to q·k
  int sliding_window = 0;   // 0: full causal; else keys with pos > query_pos - window only
  float softcap = 0.0f;     // 0: none; else scores = softcap * tanh(scores / softcap)
};

// Rotary embedding of the HF "rotate_half" (neox) layout over the first rotary_dim dims of each head.
struct RopeParams {
  Tensor inv_freq;              // [rotary_dim / 2] f32, host-computed from the config's scaling
  float attention_scaling = 1;  // multiplies cos and sin (yarn / longrope)
  int rotary_dim = 0;
};

// Each head of q and of k RMS-normalised over its Dh values before rope (Qwen3, Gemma 3):
// x * inv_rms * (weight + offset), weights [Dh].
struct QkNorm {
  const Tensor& q_weight;
  const Tensor& k_weight;
  float eps = 1e-6f, offset = 0.0f;
};

// The gated MLP's activation: out = act(gate) * up with act silu (SwiGLU: Llama, Qwen, Mistral)
// or gelu in its tanh form (GeGLU: Gemma's gelu_pytorch_tanh).
enum class Glu { SwiGLU, GeGLU };

// One projection of a group that shares its input (q/k/v, gate/up).
struct LinearPart {
  const Tensor& weight;
  const Tensor& bias;  // may be undefined
  Tensor& out;
};

// One row's draw for sample_rows(): the host sampler's (engine/sampler.h) without penalties,
// logit bias or logprobs.
struct RowSampling {
  float temperature = 0;  // <= 0: the first maximum (greedy; u unused)
  int top_k = 0;          // <= 0 or >= the vocabulary: off
  float top_p = 1;
  float min_p = 0;
  double u = 0;           // uniform in [0, 1): which token the draw lands on
};

// One logit changed before a draw (argmax_rows, sample_rows), as the host sampler changes it for
// penalties and logit bias (engine/sampler.h). Each step runs where its bit of `ops` is set, in
// this order, rounding once: divided by `repetition` if positive else multiplied by it;
// `subtract` taken away; `add` added.
struct LogitEdit {
  static constexpr uint32_t kRepetition = 1, kSubtract = 2, kAdd = 4;
  int32_t row = 0, token = 0;
  uint32_t ops = 0;
  float repetition = 1, subtract = 0, add = 0;
};

// Throws unless every edit addresses a logit of x [R, V].
inline void check_logit_edits(const Tensor& x, const std::vector<LogitEdit>& edits) {
  const int64_t V = x.dim(-1), R = V ? x.numel() / V : 0;
  for (const LogitEdit& e : edits)
    TESSERA_CHECK(e.row >= 0 && e.row < R && e.token >= 0 && e.token < V,
                  "edit_logits: logit (" + std::to_string(e.row) + ", " + std::to_string(e.token) + ") outside " +
                      shape_str(x.shape()));
}

// Throws unless Backend::logprobs() can read rows [n] and tokens [R] of x [R, V] (i32, in range)
// and write out_lp [n, 1 + top_n] (f32) and, for top_n > 0, out_ids [n, top_n] (i32).
inline void check_logprobs_shapes(const Tensor& x, const Tensor& rows, const Tensor& tokens, int top_n,
                                  const Tensor& out_lp, const Tensor& out_ids) {
  const int64_t V = x.dim(-1), R = V ? x.numel() / V : 0, n = rows.numel();
  TESSERA_CHECK(x.dtype() == DType::F32 && rows.dtype() == DType::I32 && tokens.dtype() == DType::I32 &&
                    tokens.numel() == R && top_n >= 0 && top_n <= V && out_lp.dtype() == DType::F32 &&
                    out_lp.numel() == n * (1 + top_n) &&
                    (top_n == 0 || (out_ids.dtype() == DType::I32 && out_ids.numel() == n * top_n)),
                "logprobs: " + shape_str(x.shape()) + " logits, " + std::to_string(n) + " rows, " +
                    std::to_string(tokens.numel()) + " tokens, top " + std::to_string(top_n));
}

// A mixture of experts' matrices, expert e's at index e: gate and up [I, H], down [H, I], all of
// one dtype. Backend::upload_experts uploads them as two groups (every gate and up in turn, then
// every down), so that a backend may hold them as two stacked matrices and run all experts in
// one launch.
struct Experts {
  std::vector<Tensor> gate, up, down;
};

// Memory of the device a backend computes on, in bytes.
struct MemoryInfo {
  size_t total = 0;  // CPU: physical memory; CUDA: the GPU's memory
  size_t free = 0;   // CPU: available to new allocations (MemAvailable); CUDA: cudaMemGetInfo's free
};

// A sequence of a backend's launches recorded by Backend::record() (a CUDA graph).
class Recording {
 public:
  virtual ~Recording() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;

  // Memory. empty() may leave contents uninitialised. upload() of a host tensor returns a tensor
  // in this backend's memory (the CPU backend returns the same view: weights are never copied).
  virtual Tensor empty(DType dtype, Shape shape) = 0;
  virtual Tensor upload(const Tensor& host) = 0;
  // Uploads matrices that linear_group() will use together (q/k/v, gate/up); a backend may
  // store them as consecutive rows of one matrix, to run the group as one product.
  virtual std::vector<Tensor> upload_group(const std::vector<Tensor>& hosts) {
    std::vector<Tensor> out;
    for (const Tensor& h : hosts) out.push_back(upload(h));
    return out;
  }
  virtual void download(const Tensor& src, void* host_dst) = 0;
  // Copies host into dst, a tensor of this backend of host's size, in the order of the backend's
  // work. From host_empty() memory the copy may still be in flight on return: the caller leaves
  // host alone until a later download() has returned.
  // The default serves backends that compute in host memory.
  virtual void upload_to(const Tensor& host, Tensor& dst) {
    TESSERA_CHECK(dst.device() == Device::CPU && dst.nbytes() == host.nbytes(),
                  "upload_to: " + std::to_string(host.nbytes()) + " bytes into a tensor of " +
                      std::to_string(dst.nbytes()));
    std::memcpy(dst.raw(), host.raw(), host.nbytes());
  }
  // Host memory that download() fills fastest (page-locked for a GPU, so the copy is one DMA);
  // plain memory on the CPU.
  virtual Tensor host_empty(DType dtype, Shape shape) { return Tensor::empty(dtype, std::move(shape)); }
  // download() without waiting: host_dst (host_empty() memory, src's size or more) is filled in
  // the order of the backend's work, by the time wait_downloads() returns. Work enqueued after it
  // is not waited for, so the host can read one step's results while the next one runs.
  virtual void download_async(const Tensor& src, void* host_dst) { download(src, host_dst); }
  // Waits for every download_async() so far.
  virtual void wait_downloads() {}
  // dst = src (both of this backend, the same size in bytes), in the order of the backend's work.
  // The default serves backends that compute in host memory.
  virtual void copy(const Tensor& src, Tensor& dst) {
    TESSERA_CHECK(src.device() == Device::CPU && dst.device() == Device::CPU && src.nbytes() == dst.nbytes(),
                  "copy: " + std::to_string(src.nbytes()) + " bytes into a tensor of " + std::to_string(dst.nbytes()));
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
  }
  // Device memory now; what this backend has allocated and cached counts as used.
  virtual MemoryInfo memory_info() = 0;
  // The dtype in which linear() best takes its input (and writes an output that only feeds
  // another product) for `tokens` rows and weights of `weight_dtype`: f32, or that 16-bit dtype
  // where the backend would round the input to it anyway (a GPU's tensor-core products).
  virtual DType linear_input_dtype(DType /*weight_dtype*/, int64_t /*tokens*/) const { return DType::F32; }
  // Whether the weights of embedding() and of every product (linear and the ops built on it) may
  // be quantized (core/quantization.h). The loader dequantizes them for a backend that says no.
  virtual bool holds_quantized() const { return false; }

  // Recording (a GPU's CUDA graphs): record(ops) captures the launches ops makes, without running
  // them, and replay() runs them again, each time, over the same memory: one launch for a whole
  // step. ops may not upload, download or wait for the device. What ops allocates comes from a
  // pool that recordings share, so a recording's outputs are valid only until another one replays.
  // nullptr where the backend cannot record (the CPU's ops run as they are called).
  virtual bool can_record() const { return false; }
  virtual std::unique_ptr<Recording> record(const std::function<void()>& /*ops*/) { return nullptr; }
  virtual void replay(const Recording& /*r*/) {}

  // out[T, D] = table[ids[t], :] * scale (as f32; Gemma scales its embeddings by sqrt(D))
  virtual void embedding(const Tensor& table, const Tensor& ids, float scale, Tensor& out) = 0;
  // out[T, D] = x / rms(x) * (w + offset); offset is 1 for Gemma-style norms, else 0.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out) = 0;
  // out[T, N] = x[T, K] · w[N, K]ᵀ (+ bias[N] when defined)
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) = 0;
  // out[i] = x · parts[i].weightᵀ (+ bias) for projections of one input: a backend may read x
  // once and launch once for the group. The default runs linear() per part.
  virtual void linear_group(const Tensor& x, std::initializer_list<LinearPart> parts) {
    for (const LinearPart& p : parts) linear(x, p.weight, p.bias, p.out);
  }
  // x[T, H, Dh] rotated in place at positions[T].
  virtual void rope(Tensor& x, const Tensor& positions, const RopeParams& p) = 0;
  // Writes each new token's k, v [T, Hkv, Dh] to cache rows slots[T] of k_cache, v_cache
  // [num_blocks * block_size, Hkv, Dh]; a token whose slot is negative is not stored (the empty
  // sequences that pad a batch to a recorded shape).
  virtual void store_kv(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                        Tensor& v_cache) = 0;
  // rope(q), rope(k), then store_kv(k, v): a layer's new tokens into the cache in one pass; with
  // qk_norm, q and k are normalised per head first (in place). The default runs the ops one by one.
  virtual void rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const Tensor& positions,
                             const RopeParams& p, const Tensor& slots, Tensor& k_cache, Tensor& v_cache,
                             const QkNorm* qk_norm) {
    if (qk_norm) normalize_heads(q, k, *qk_norm);
    rope(q, positions, p);
    rope(k, positions, p);
    store_kv(k, v, slots, k_cache, v_cache);
  }
  // A layer's attention inputs in one call: q, k, v = x · weightᵀ (+ bias) of the three parts,
  // then rope_store_kv() of them as [T, heads, Dh] (Dh: the caches'). q.out [T, H * Dh] gets the
  // rotated queries; k.out and v.out are scratch: the default runs linear_group() into them, a
  // backend may leave them unwritten (the caches hold the new k and v).
  virtual void linear_rope_store_kv(const Tensor& x, const LinearPart& q, const LinearPart& k,
                                    const LinearPart& v, const Tensor& positions, const RopeParams& p,
                                    const Tensor& slots, Tensor& k_cache, Tensor& v_cache,
                                    const QkNorm* qk_norm) {
    linear_group(x, {q, k, v});
    const int64_t Dh = k_cache.dim(-1), T = q.out.dim(0);
    Tensor q3 = q.out.reshape({T, q.weight.dim(0) / Dh, Dh}), k3 = k.out.reshape({T, k.weight.dim(0) / Dh, Dh});
    rope_store_kv(q3, k3, v.out.reshape(k3.shape()), positions, p, slots, k_cache, v_cache, qk_norm);
  }
  // Causal attention of q [T, H, Dh] over each sequence's paged cache; out [T, H, Dh] in f32 or
  // the 16-bit format of the product it feeds (linear_input_dtype). H must be a multiple of the
  // cache's Hkv (grouped-query attention).
  virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const AttentionMeta& meta, const AttentionParams& p, Tensor& out) = 0;
  // out = act(gate) * up, all [T, F] (Glu)
  virtual void glu(Glu act, const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // The gated MLP's first half: out[T, F] = act(x · gate.weightᵀ + gate.bias) * (x · up.weightᵀ +
  // up.bias), x [T, K], weights [F, K]. gate.out and up.out [T, F] are scratch: the default runs
  // linear_group() into them, then glu(); a backend may compute out without them (leaving them
  // unwritten). out may alias gate.out or up.out.
  virtual void linear_glu(Glu act, const Tensor& x, const LinearPart& gate, const LinearPart& up, Tensor& out) {
    linear_group(x, {gate, up});
    glu(act, gate.out, up.out, out);
  }
  // x = cap * tanh(x / cap) in place (f32): Gemma 2's soft-capped final logits.
  virtual void softcap(Tensor& x, float cap) = 0;
  // out = a + b (out may alias a)
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // x += delta, then out = rms_norm(x): a sublayer's residual add and the next one's norm in one
  // pass. out may alias delta. The default runs add() and rms_norm().
  virtual void add_rms_norm(Tensor& x, const Tensor& delta, const Tensor& w, float eps, float offset, Tensor& out) {
    add(x, delta, x);
    rms_norm(x, w, eps, offset, out);
  }
  // A sublayer's output product, its residual add and the next norm: x[T, N] += a[T, K] ·
  // p.weightᵀ (+ p.bias), then out = rms_norm(x). p.out [T, N] (f32) is scratch: the default runs
  // linear() into it, then add_rms_norm(); a backend may add partial products of k ranges in the
  // norm's pass instead (leaving it unwritten). out may alias p.out.
  virtual void linear_add_rms_norm(const Tensor& a, const LinearPart& p, Tensor& x, const Tensor& w, float eps,
                                   float offset, Tensor& out) {
    linear(a, p.weight, p.bias, p.out);
    add_rms_norm(x, p.out, w, eps, offset, out);
  }

  // Products that take the residual stream itself and RMS-normalise it as they read, so that no
  // norm kernel runs between a sublayer's output product and the next one's input products: the
  // norm's weight is folded into the weights of the products it feeds (fold_norm_weight), and
  // the norm keeps a unit weight. Whether this backend has such products for T tokens (on a GPU,
  // the decode GEMV's one or two); the decoder then calls the normed_ ops and linear_add().
  virtual bool normalises_inputs(int64_t /*tokens*/) const { return false; }
  // w[N, K] *= norm[k] + offset, in place (w in this backend's memory, f32 or 16-bit, rounded once).
  virtual void fold_norm_weight(Tensor& /*w*/, const Tensor& /*norm*/, float /*offset*/) {
    throw Error("fold_norm_weight: not supported by this backend");
  }
  // x's RMSNorm with a unit weight: unit + offset is 1 (a norm whose weight was folded away).
  struct UnitNorm {
    const Tensor& unit;
    float eps, offset;
  };
  // linear_rope_store_kv() and linear_glu() of rms_norm(x) with a unit weight. The defaults
  // normalise x into a scratch tensor, then run those.
  virtual void normed_rope_store_kv(const Tensor& x, const UnitNorm& n, const LinearPart& q,
                                    const LinearPart& k, const LinearPart& v, const Tensor& positions,
                                    const RopeParams& p, const Tensor& slots, Tensor& k_cache,
                                    Tensor& v_cache, const QkNorm* qk_norm) {
    Tensor h = empty(DType::F32, x.shape());
    rms_norm(x, n.unit, n.eps, n.offset, h);
    linear_rope_store_kv(h, q, k, v, positions, p, slots, k_cache, v_cache, qk_norm);
  }
  virtual void normed_glu(Glu act, const Tensor& x, const UnitNorm& n, const LinearPart& gate,
                          const LinearPart& up, Tensor& out) {
    Tensor h = empty(DType::F32, x.shape());
    rms_norm(x, n.unit, n.eps, n.offset, h);
    linear_glu(act, h, gate, up, out);
  }
  // x[T, N] += a[T, K] · p.weightᵀ (+ p.bias): a sublayer's output product and its residual add.
  // p.out [T, N] (f32) is scratch: the default runs linear() into it, then add().
  virtual void linear_add(const Tensor& a, const LinearPart& p, Tensor& x) {
    linear(a, p.weight, p.bias, p.out);
    add(x, p.out, x);
  }

  // Uploads a mixture's experts in the layout of Experts: every gate and up in turn as one group,
  // then every down as another.
  Experts upload_experts(const std::vector<Tensor>& gate, const std::vector<Tensor>& up,
                         const std::vector<Tensor>& down) {
    TESSERA_CHECK(up.size() == gate.size() && down.size() == gate.size(), "upload_experts: unequal counts");
    std::vector<Tensor> gate_up;
    for (size_t e = 0; e < gate.size(); ++e) gate_up.push_back(gate[e]), gate_up.push_back(up[e]);
    gate_up = upload_group(gate_up);
    Experts ex;
    for (size_t e = 0; e < gate.size(); ++e) ex.gate.push_back(gate_up[2 * e]), ex.up.push_back(gate_up[2 * e + 1]);
    ex.down = upload_group(down);
    return ex;
  }
  // A mixture of experts' routing: each token's top_k experts by its router logits [T, E] (f32),
  // into ids [T, top_k] (i32; the largest logit first, the lower expert on ties) and weights
  // [T, top_k] (f32): their softmax probabilities over all E, divided by the k's sum where
  // `renormalize`. (Ranking by logit is ranking by probability without exp's ties.)
  virtual void moe_route(const Tensor& logits, int top_k, bool renormalize, Tensor& ids, Tensor& weights) = 0;
  // x[T, H] += sum over j of weights[t, j] * down_e(act(gate_e · h[t]) * (up_e · h[t])), e =
  // ids[t, j] (h and x f32; ids and weights as moe_route() writes them). The default groups the
  // tokens by expert on the host (a download of ids and weights) and runs gather_rows,
  // linear_glu, linear and scatter_add_rows for each expert chosen.
  virtual void moe_experts(Glu act, const Tensor& h, const Tensor& ids, const Tensor& weights, const Experts& e,
                           Tensor& x);
  // Whether moe_experts() of up to `tokens` rows with these experts runs without waiting for the
  // device, so that a forward with experts may be recorded (can_record()).
  virtual bool moe_experts_recordable(const Experts& /*e*/, int64_t /*tokens*/) const { return false; }
  // out[R, D] = x[rows[r], :]
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;
  // out[rows[r], :] += weights[r] * x[r, :] (f32; rows i32 and distinct): a mixture of experts'
  // outputs weighted into the residual stream.
  virtual void scatter_add_rows(const Tensor& x, const Tensor& rows, const Tensor& weights, Tensor& out) = 0;
  // out[r] (i32) = the column of row r's largest element, the first one on ties: greedy
  // sampling where the logits are, so only the ids travel.
  virtual void argmax_rows(const Tensor& x, Tensor& out) = 0;
  // out[r] (i32) = a token drawn from row r of x [R, V] as the host sampler draws it with the
  // uniform rows[r].u: probabilities softmax(x / temperature) over the candidates (the top_k best,
  // larger value then lower id first, when top-k or top-p cuts; else every token in id order),
  // cut to the smallest prefix whose mass reaches top_p, without tokens below min_p times the
  // most likely one; the token is the first whose cumulative probability exceeds u times the
  // kept mass. Sampling where the logits are: only the ids travel.
  virtual void sample_rows(const Tensor& x, const std::vector<RowSampling>& rows, Tensor& out) = 0;
  // x [R, V] edited in place: at most one edit per (row, token), every one in range.
  virtual void edit_logits(Tensor& x, const std::vector<LogitEdit>& edits) = 0;
  // Log-probabilities where the logits are (a sampled token's, a scored text's), so that only
  // they travel. For the rows of x [R, V] listed in rows [n] (i32) — each row's log-softmax,
  // x - (max + log(sum of exp(x - max))) with the sum in double — out_lp [n, 1 + top_n] (f32)
  // gets row rows[i]'s value at token tokens[rows[i]] (tokens: [R] i32, in range), then its
  // top_n largest values (larger first, lower id on ties), whose ids go to out_ids [n, top_n]
  // (i32; unused when top_n is 0). A row whose normaliser is not finite (an inf or NaN logit)
  // lists NaN or -inf values, in an unspecified order.
  virtual void logprobs(const Tensor& x, const Tensor& rows, const Tensor& tokens, int top_n, Tensor& out_lp,
                        Tensor& out_ids) = 0;

 protected:
  // rope_store_kv()'s first step with a QkNorm, as two rms_norm() calls: each head of q [T, H, Dh]
  // and k [T, Hkv, Dh] normalised in place.
  void normalize_heads(Tensor& q, Tensor& k, const QkNorm& n) {
    rms_norm(q, n.q_weight, n.eps, n.offset, q);
    rms_norm(k, n.k_weight, n.eps, n.offset, k);
  }
};

inline void Backend::moe_experts(Glu act, const Tensor& h, const Tensor& ids, const Tensor& weights,
                                  const Experts& ex, Tensor& x) {
  const int64_t T = h.dim(0), H = h.dim(1), E = int64_t(ex.gate.size()), k = T ? ids.numel() / T : 0;
  TESSERA_CHECK(h.dtype() == DType::F32 && x.dtype() == DType::F32 && x.shape() == h.shape() &&
                    ids.dtype() == DType::I32 && weights.dtype() == DType::F32 && ids.numel() == T * k &&
                    weights.numel() == T * k && ex.up.size() == ex.gate.size() && ex.down.size() == ex.gate.size(),
                "moe_experts: h " + shape_str(h.shape()) + ", x " + shape_str(x.shape()) + ", ids " +
                    shape_str(ids.shape()) + ", weights " + shape_str(weights.shape()) + ", " +
                    std::to_string(E) + " experts");
  if (T == 0) return;
  std::vector<int32_t> chosen(static_cast<size_t>(T * k));
  std::vector<float> p(static_cast<size_t>(T * k));
  download(ids, chosen.data());
  download(weights, p.data());
  // Each expert's tokens in token order, all experts' one after another (one upload).
  std::vector<int64_t> begin(static_cast<size_t>(E) + 2, 0);
  for (int32_t id : chosen) {
    TESSERA_CHECK(id >= 0 && id < E, "moe_experts: expert " + std::to_string(id) + " of " + std::to_string(E));
    ++begin[size_t(id) + 2];
  }
  for (int64_t i = 2; i <= E + 1; ++i) begin[size_t(i)] += begin[size_t(i) - 1];
  Tensor rows = Tensor::empty(DType::I32, {T * k}), row_weights = Tensor::empty(DType::F32, {T * k});
  for (int64_t i = 0; i < T * k; ++i) {
    const int64_t at = begin[size_t(chosen[size_t(i)]) + 1]++;
    rows.data<int32_t>()[at] = int32_t(i / k);
    row_weights.data<float>()[at] = p[size_t(i)];
  }
  const Tensor dev_rows = upload(rows), dev_weights = upload(row_weights);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = begin[size_t(e)], n = begin[size_t(e) + 1] - b;
    if (n == 0) continue;
    const int64_t I = ex.gate[size_t(e)].dim(0);
    const Tensor r = dev_rows.slice_rows(b, b + n);
    Tensor in = empty(DType::F32, {n, H}), gate = empty(DType::F32, {n, I}), up = empty(DType::F32, {n, I});
    Tensor out = empty(DType::F32, {n, H});
    gather_rows(h, r, in);
    linear_glu(act, in, {ex.gate[size_t(e)], Tensor(), gate}, {ex.up[size_t(e)], Tensor(), up}, gate);
    linear(gate, ex.down[size_t(e)], Tensor(), out);
    scatter_add_rows(out, r, dev_weights.slice_rows(b, b + n), x);
  }
}

struct CpuOptions {
  bool reference = false;  // plain scalar loops: the reference every fast path is tested against
  int threads = 0;         // 0: all cores
};
std::unique_ptr<Backend> make_cpu_backend(const CpuOptions& opts = {});

}  // namespace tessera

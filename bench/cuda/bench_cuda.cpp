// End-to-end GPU throughput on a random Llama-3.1-8B-shaped bf16 model built in device memory
// (hidden 4096, intermediate 14336, 32 layers, 32 heads, 8 kv heads, head_dim 128, vocab
// 128256, untied), run through the Backend op set in the same sequence as nn::Decoder, with a
// bf16 paged KV cache. Measures in the same run the card's two ceilings (device-to-device copy
// bandwidth, cuBLASLt bf16 GEMM rate), then batch-1 and batched decode and a 2048-token prefill,
// each next to its limit and to the targets, and last the GPU sampler's draws on flat and peaked
// logits.
#include <CLI/CLI.hpp>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "backend/cuda_loader.h"
#include "core/error.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
}
void ck(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(std::string(what) + ": cuBLAS status " + std::to_string(int(s)));
}
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Shape8B {
  int hidden = 4096, intermediate = 14336, layers = 32, heads = 32, kv_heads = 8, head_dim = 128, vocab = 128256;
  // Parameters a token passes through: every matrix (the embedding is only a row lookup).
  double matmul_params() const {
    double per_layer = double(hidden) * (2.0 * heads * head_dim + 2.0 * kv_heads * head_dim) +
                       3.0 * double(hidden) * intermediate;
    return layers * per_layer + double(vocab) * hidden;
  }
  double kv_bytes_per_token() const { return 2.0 * layers * kv_heads * head_dim * 2; }  // bf16 K and V
};

// Pinned host pools of bf16 values, uniform with standard deviation `sd`; device weights are
// filled from slices of them at varied offsets (random data, not zeros, at host-copy speed).
class Pool {
 public:
  Pool(size_t n, float sd, uint64_t seed) : n_(n), s_(seed * 0x9E3779B97F4A7C15ull + 1) {
    ck(cudaMallocHost(reinterpret_cast<void**>(&p_), n * 2), "cudaMallocHost");
    for (size_t i = 0; i < n; ++i) {
      float u = float(next() >> 40) / float(1 << 24) * 2.0f - 1.0f;
      p_[i] = f32_to_bf16(u * sd * 1.7320508f);
    }
  }
  ~Pool() { cudaFreeHost(p_); }
  void fill(void* dst, size_t elements) {
    for (size_t done = 0; done < elements;) {
      size_t chunk = std::min(elements - done, n_ / 2);
      size_t off = size_t(next() % (n_ - chunk + 1));
      ck(cudaMemcpy(static_cast<uint16_t*>(dst) + done, p_ + off, chunk * 2, cudaMemcpyHostToDevice), "fill");
      done += chunk;
    }
  }

 private:
  uint64_t next() { return s_ ^= s_ << 13, s_ ^= s_ >> 7, s_ ^= s_ << 17; }
  size_t n_;
  uint64_t s_;
  uint16_t* p_ = nullptr;
};

struct Layer {
  Tensor in_norm, post_norm, q, k, v, o, gate, up, down;
};

struct Model {
  Shape8B m;
  Tensor embed, norm, lm_head, inv_freq;
  Tensor unit_norm;  // defined where the norms are folded into the products (as nn::Decoder does)
  std::vector<Layer> layers;
  std::vector<Tensor> k_cache, v_cache;
  Tensor ids_host;  // page-locked, as the runner's
  int block_size = 16, num_blocks = 0;
};

Tensor norm_weight(Backend& be, int n) {
  Tensor h = Tensor::empty(DType::BF16, {n});
  for (int i = 0; i < n; ++i) h.data<uint16_t>()[i] = f32_to_bf16(1.0f + 0.05f * std::sin(float(i)));
  return be.upload(h);
}

Model build_model(Backend& be, int kv_tokens) {
  Model M;
  const Shape8B& m = M.m;
  const int H = m.hidden, I = m.intermediate, Dh = m.head_dim;
  Pool narrow(size_t(64) << 20, 1.0f / std::sqrt(float(H)), 1), wide(size_t(64) << 20, 1.0f / std::sqrt(float(I)), 2);
  auto matrix = [&](Pool& pool, int rows, int cols) {
    Tensor t = be.empty(DType::BF16, {rows, cols});
    pool.fill(t.raw(), size_t(rows) * cols);
    return t;
  };
  M.embed = matrix(narrow, m.vocab, H);
  M.lm_head = matrix(narrow, m.vocab, H);
  M.norm = norm_weight(be, H);
  for (int l = 0; l < m.layers; ++l) {
    Layer L;
    L.in_norm = norm_weight(be, H);
    L.post_norm = norm_weight(be, H);
    // q/k/v and gate/up stacked by rows, as the backend's upload_group stores them.
    Tensor qkv = matrix(narrow, (m.heads + 2 * m.kv_heads) * Dh, H), gate_up = matrix(narrow, 2 * I, H);
    L.q = qkv.slice_rows(0, m.heads * Dh);
    L.k = qkv.slice_rows(m.heads * Dh, (m.heads + m.kv_heads) * Dh);
    L.v = qkv.slice_rows((m.heads + m.kv_heads) * Dh, (m.heads + 2 * m.kv_heads) * Dh);
    L.o = matrix(narrow, H, m.heads * Dh);
    L.gate = gate_up.slice_rows(0, I);
    L.up = gate_up.slice_rows(I, 2 * I);
    L.down = matrix(wide, H, I);
    M.layers.push_back(std::move(L));
  }
  if (be.normalises_inputs(1)) {  // nn::Decoder::fold_norms
    Tensor unit = Tensor::empty(DType::F32, {H});
    std::fill_n(unit.data<float>(), H, 1.0f);
    M.unit_norm = be.upload(unit);
    for (Layer& L : M.layers) {
      for (Tensor* w : {&L.q, &L.k, &L.v}) be.fold_norm_weight(*w, L.in_norm, 0.0f);
      for (Tensor* w : {&L.gate, &L.up}) be.fold_norm_weight(*w, L.post_norm, 0.0f);
      L.in_norm = L.post_norm = M.unit_norm;
    }
  }
  Tensor inv = Tensor::empty(DType::F32, {Dh / 2});
  for (int i = 0; i < Dh / 2; ++i) inv.data<float>()[i] = 1.0f / std::pow(500000.0f, float(2 * i) / float(Dh));
  M.inv_freq = be.upload(inv);
  M.num_blocks = (kv_tokens + M.block_size - 1) / M.block_size;
  Pool kv(size_t(64) << 20, 1.0f, 3);
  for (int l = 0; l < m.layers; ++l) {
    for (auto* cache : {&M.k_cache, &M.v_cache}) {
      cache->push_back(be.empty(DType::BF16, {int64_t(M.num_blocks) * M.block_size, m.kv_heads, Dh}));
      // Random keys and values, as a model's are, for the positions the steps read but never store.
      kv.fill(cache->back().raw(), size_t(cache->back().numel()));
    }
  }
  ck(cudaDeviceSynchronize(), "build");
  return M;
}

Tensor upload_i32(Backend& be, const std::vector<int32_t>& v, Shape shape) {
  Tensor h = Tensor::empty(DType::I32, std::move(shape));
  std::copy(v.begin(), v.end(), h.data<int32_t>());
  return be.upload(h);
}

// The metadata of one engine step of `seqs` sequences that each hold `context` tokens after it,
// `new_tokens` of them computed now; sequence s owns a run of consecutive blocks.
struct StepInputs {
  int seqs = 0;
  int64_t T = 0;
  AttentionMeta meta;
  Tensor tokens, slots, logits_rows;
};

StepInputs step_inputs(Backend& be, const Model& M, int seqs, int new_tokens, int context) {
  const int bs = M.block_size, per = (context + bs - 1) / bs;
  TESSERA_CHECK(int64_t(seqs) * per <= M.num_blocks, "bench: KV cache too small");
  std::vector<int32_t> ids, pos, slots, starts{0}, ctx, tables, rows;
  for (int s = 0; s < seqs; ++s) {
    for (int i = 0; i < new_tokens; ++i) {
      int p = context - new_tokens + i;
      ids.push_back(int32_t((s * 7919 + p * 31) % M.m.vocab));
      pos.push_back(p);
      slots.push_back((s * per + p / bs) * bs + p % bs);
    }
    starts.push_back(int32_t(ids.size()));
    rows.push_back(int32_t(ids.size()) - 1);
    ctx.push_back(context);
    for (int b = 0; b < per; ++b) tables.push_back(s * per + b);
  }
  StepInputs in;
  in.seqs = seqs;
  in.T = int64_t(ids.size());
  in.meta.positions = upload_i32(be, pos, {in.T});
  in.meta.seq_starts = upload_i32(be, starts, {seqs + 1});
  in.meta.context_lens = upload_i32(be, ctx, {seqs});
  in.meta.block_tables = upload_i32(be, tables, {seqs, per});
  in.meta.num_seqs = seqs, in.meta.max_blocks = per, in.meta.block_size = bs;
  in.meta.max_query_len = new_tokens, in.meta.max_context_len = context;
  in.tokens = upload_i32(be, ids, {in.T});
  in.slots = upload_i32(be, slots, {in.T});
  in.logits_rows = upload_i32(be, rows, {seqs});
  return in;
}

// One engine step's forward, in nn::Decoder's op sequence; returns the logits of each sequence's
// last token.
Tensor forward(Backend& be, Model& M, const StepInputs& in) {
  const Shape8B& m = M.m;
  const int seqs = in.seqs;
  const int64_t T = in.T, H = m.hidden, Dh = m.head_dim, nq = m.heads, nkv = m.kv_heads;
  RopeParams rope{M.inv_freq, 1.0f, int(Dh)};

  const DType act = be.linear_input_dtype(DType::BF16, T);
  Tensor x = be.empty(DType::F32, {T, H}), h = be.empty(act, {T, H}), d = be.empty(DType::F32, {T, H});
  Tensor normed = be.empty(DType::F32, {T, H});
  Tensor q = be.empty(DType::F32, {T, nq, Dh}), k = be.empty(DType::F32, {T, nkv, Dh});
  Tensor v = be.empty(DType::F32, {T, nkv, Dh}), attn = be.empty(act, {T, nq, Dh});
  Tensor gate = be.empty(act, {T, m.intermediate}), up = be.empty(act, {T, m.intermediate});
  Tensor q2 = q.reshape({T, nq * Dh}), k2 = k.reshape({T, nkv * Dh}), v2 = v.reshape({T, nkv * Dh});
  Tensor attn2 = attn.reshape({T, nq * Dh});
  const Tensor none;
  be.embedding(M.embed, in.tokens, 1.0f, x);
  const bool normed_products = M.unit_norm.defined() && be.normalises_inputs(T);
  const Backend::UnitNorm unit{M.unit_norm, 1e-5f, 0.0f};
  if (!normed_products) be.rms_norm(x, M.layers[0].in_norm, 1e-5f, 0.0f, h);
  for (int l = 0; l < m.layers; ++l) {
    Layer& L = M.layers[size_t(l)];
    const LinearPart qp{L.q, none, q2}, kp{L.k, none, k2}, vp{L.v, none, v2};
    Tensor &kc = M.k_cache[size_t(l)], &vc = M.v_cache[size_t(l)];
    if (normed_products)
      be.normed_rope_store_kv(x, unit, qp, kp, vp, in.meta.positions, rope, in.slots, kc, vc, nullptr);
    else
      be.linear_rope_store_kv(h, qp, kp, vp, in.meta.positions, rope, in.slots, kc, vc, nullptr);
    be.attention(q, kc, vc, in.meta, {1.0f / std::sqrt(float(Dh)), 0, 0.0f}, attn);
    const bool last_layer = l + 1 == m.layers;
    if (normed_products) {
      be.linear_add(attn2, {L.o, none, d}, x);
      be.normed_glu(Glu::SwiGLU, x, unit, {L.gate, none, gate}, {L.up, none, up}, gate);
      be.linear_add(gate, {L.down, none, d}, x);
      if (last_layer) be.rms_norm(x, M.norm, 1e-5f, 0.0f, normed);
      continue;
    }
    be.linear_add_rms_norm(attn2, {L.o, none, d}, x, L.post_norm, 1e-5f, 0.0f, h);
    be.linear_glu(Glu::SwiGLU, h, {L.gate, none, gate}, {L.up, none, up}, gate);
    be.linear_add_rms_norm(gate, {L.down, none, d}, x, last_layer ? M.norm : M.layers[size_t(l) + 1].in_norm, 1e-5f,
                           0.0f, last_layer ? normed : h);
  }
  Tensor last = be.empty(DType::F32, {seqs, H});
  be.gather_rows(normed, in.logits_rows, last);
  Tensor logits = be.empty(DType::F32, {seqs, m.vocab});
  be.linear(last, M.lm_head, none, logits);
  return logits;
}

// Draws each row's token greedily where the logits are and reads the ids back, as the runner
// does for rows drawn on the GPU (the step's one synchronisation).
void draw_greedy(Backend& be, Model& M, const Tensor& logits) {
  Tensor ids = be.empty(DType::I32, {logits.dim(0)});
  be.argmax_rows(logits, ids);
  if (!M.ids_host.defined() || M.ids_host.numel() < ids.numel()) M.ids_host = be.host_empty(DType::I32, {ids.numel()});
  be.download(ids, M.ids_host.raw());
}

void step(Backend& be, Model& M, int seqs, int new_tokens, int context) {
  draw_greedy(be, M, forward(be, M, step_inputs(be, M, seqs, new_tokens, context)));
}


// Device activations (f32 or bf16) of small random values.
Tensor random_activations(Backend& be, Shape shape, DType dt = DType::F32) {
  Tensor h = Tensor::empty(dt, std::move(shape));
  uint64_t s = 0x2545F4914F6CDD1Dull;
  for (int64_t i = 0; i < h.numel(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    float v = float(s >> 40) / float(1 << 24) - 0.5f;
    if (dt == DType::BF16) h.data<uint16_t>()[i] = f32_to_bf16(v);
    else h.data<float>()[i] = v;
  }
  return be.upload(h);
}

// Seconds per call of `op`, queued `reps` times back to back and then synchronised (a small
// download), after a few warm-up calls: the op's device time, or its host cost where that is larger.
template <class F>
double op_seconds(Backend& be, int reps, F&& op) {
  Tensor sync = be.empty(DType::F32, {1});
  float tmp;
  for (int i = 0; i < 3; ++i) op();
  be.download(sync, &tmp);
  auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) op();
  be.download(sync, &tmp);
  return seconds_since(t0) / reps;
}

// Logits of R rows over the vocabulary: "flat" (uniform in [-4, 4], as from random weights: a
// top-p nucleus of most of the vocabulary) or "peaked" (the same with 16 tokens raised 10-16
// above: a language model's usual few candidates).
Tensor sampling_logits(Backend& be, int R, int V, bool peaked) {
  Tensor h = Tensor::empty(DType::F32, {R, V});
  uint64_t s = 0x9E3779B97F4A7C15ull;
  auto next = [&] { return s ^= s << 13, s ^= s >> 7, s ^= s << 17, float(s >> 40) / float(1 << 24); };
  for (int64_t i = 0; i < h.numel(); ++i) h.data<float>()[i] = 8.0f * next() - 4.0f;
  if (peaked)
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 16; ++k) h.data<float>()[int64_t(r) * V + int64_t(next() * float(V - 1))] += 10.0f + 6.0f * next();
  return be.upload(h);
}

// Microseconds per draw of R rows (Backend::sample_rows, host preparation included), beside the
// greedy argmax and the rows' logprobs with a top-5 list (Backend::logprobs).
void sampling_times(Backend& be, int vocab) {
  std::printf("\nsampling %d logits a row, µs per call (host preparation included):\n", vocab);
  std::printf("%-6s %-7s %10s %14s %14s %14s %12s\n", "rows", "logits", "argmax", "T 0.8 p 0.95", "T 0.7 k 40", "T 1.0",
              "logprobs 5");
  for (int R : {1, 64})
    for (bool peaked : {false, true}) {
      Tensor x = sampling_logits(be, R, vocab, peaked), ids = be.empty(DType::I32, {R});
      auto draw = [&](RowSampling d) {
        std::vector<RowSampling> rows(size_t(R), d);
        for (int r = 0; r < R; ++r) rows[size_t(r)].u = (r + 0.5) / R;
        return 1e6 * op_seconds(be, 20, [&] { be.sample_rows(x, rows, ids); });
      };
      const double greedy = 1e6 * op_seconds(be, 20, [&] { be.argmax_rows(x, ids); });
      std::vector<int32_t> all(static_cast<size_t>(R));
      std::iota(all.begin(), all.end(), 0);
      Tensor rows = upload_i32(be, all, {R}), lp = be.empty(DType::F32, {R, 6}), top = be.empty(DType::I32, {R, 5});
      const double logprobs = 1e6 * op_seconds(be, 20, [&] { be.logprobs(x, rows, rows, 5, lp, top); });
      std::printf("%-6d %-7s %10.1f %14.1f %14.1f %14.1f %12.1f\n", R, peaked ? "peaked" : "flat", greedy,
                  draw({0.8f, 0, 0.95f, 0.0f, 0}), draw({0.7f, 40, 1.0f, 0.0f, 0}), draw({1.0f, 0, 1.0f, 0.0f, 0}),
                  logprobs);
    }
}

// Where one step's time goes: each op alone at the step's shapes (one layer's worth; the step
// runs each 32 times, the LM head once).
void op_breakdown(Backend& be, Model& M, int seqs, int new_tokens, int context) {
  const Shape8B& m = M.m;
  StepInputs in = step_inputs(be, M, seqs, new_tokens, context);
  const int64_t T = in.T, H = m.hidden, Dh = m.head_dim, nq = m.heads, nkv = m.kv_heads, I = m.intermediate;
  const DType act = be.linear_input_dtype(DType::BF16, T);
  Tensor x = random_activations(be, {T, H}), h = random_activations(be, {T, H}, act);
  Tensor d = random_activations(be, {T, H});
  Tensor q = random_activations(be, {T, nq, Dh}), k = random_activations(be, {T, nkv, Dh});
  Tensor v = random_activations(be, {T, nkv, Dh}), attn = be.empty(act, {T, nq, Dh});
  Tensor big = random_activations(be, {T, I}, act), big2 = be.empty(act, {T, I});
  Tensor logits = be.empty(DType::F32, {seqs, m.vocab}), last = random_activations(be, {seqs, H});
  Layer& L = M.layers[0];
  const Tensor none;
  const int reps = T >= 1024 ? 5 : 20;
  std::printf("\nops at %d sequence(s) x %d new token(s), context %d (T = %lld):\n", seqs, new_tokens, context,
              (long long)T);
  std::printf("  %-26s %10s %10s %10s\n", "op", "us", "GB/s", "TFLOP/s");
  double layer_us = 0;
  // A product of `in_x` with weights of `bytes` (one matrix or a group), timed by `run`.
  auto product = [&](const char* name, const Tensor& in_x, double bytes, auto&& run, bool per_layer = true) {
    double s = op_seconds(be, reps, run);
    double flops = bytes * double(in_x.numel() / in_x.dim(-1));  // 2 flops per bf16 weight and token
    std::printf("  %-26s %10.1f %10.0f %10.1f\n", name, s * 1e6, bytes / s / 1e9, flops / s / 1e12);
    if (per_layer) layer_us += s * 1e6;
  };
  auto lin = [&](const char* name, const Tensor& in_x, const Tensor& w, Tensor out, bool per_layer = true) {
    product(name, in_x, double(w.nbytes()), [&] { be.linear(in_x, w, none, out); }, per_layer);
  };
  auto op = [&](const char* name, auto&& f, bool per_layer = true) {
    double s = op_seconds(be, reps, f);
    std::printf("  %-26s %10.1f\n", name, s * 1e6);
    if (per_layer) layer_us += s * 1e6;
  };
  Tensor q2 = q.reshape({T, nq * Dh}), k2 = k.reshape({T, nkv * Dh}), v2 = v.reshape({T, nkv * Dh});
  // The layer's first op, then its two halves apart (not counted in the layer's sum).
  const double qkv_bytes = double(L.q.nbytes() + L.k.nbytes() + L.v.nbytes());
  RopeParams rope{M.inv_freq, 1.0f, int(Dh)};
  product("qkv + rope + store_kv", h, qkv_bytes, [&] {
    be.linear_rope_store_kv(h, {L.q, none, q2}, {L.k, none, k2}, {L.v, none, v2}, in.meta.positions, rope,
                            in.slots, M.k_cache[0], M.v_cache[0], nullptr);
  });
  product("  linear qkv 6144x4096", h, qkv_bytes,
          [&] { be.linear_group(h, {{L.q, none, q2}, {L.k, none, k2}, {L.v, none, v2}}); }, false);
  auto rope_store = [&] {
    be.rope_store_kv(q, k, v, in.meta.positions, rope, in.slots, M.k_cache[0], M.v_cache[0], nullptr);
  };
  op("  rope q, k + store_kv", rope_store, false);
  double kv_bytes = double(seqs) * context * m.kv_bytes_per_token() / m.layers;
  {
    double s = op_seconds(be, reps, [&] {
      be.attention(q, M.k_cache[0], M.v_cache[0], in.meta, {1.0f / std::sqrt(float(Dh)), 0, 0.0f}, attn);
    });
    // Causal prefill does about half of the square's products.
    double flops = 4.0 * double(nq) * Dh * T * (new_tokens > 1 ? (context + 1) / 2.0 : context);
    std::printf("  %-26s %10.1f %10.0f %10.1f\n", "attention", s * 1e6, kv_bytes / s / 1e9, flops / s / 1e12);
    layer_us += s * 1e6;
  }
  // o and down with the residual add and next norm, then each apart (not counted).
  Tensor attn2 = attn.reshape({T, nq * Dh});
  product("o + add_rms_norm", attn2, double(L.o.nbytes()),
          [&] { be.linear_add_rms_norm(attn2, {L.o, none, d}, x, L.post_norm, 1e-5f, 0.0f, h); });
  lin("  linear o 4096x4096", attn2, L.o, d, false);
  op("  add_rms_norm", [&] { be.add_rms_norm(x, d, L.post_norm, 1e-5f, 0.0f, h); }, false);
  product("linear gate+up 28672x4096", h, double(L.gate.nbytes() + L.up.nbytes()),
          [&] { be.linear_group(h, {{L.gate, none, big2}, {L.up, none, big}}); });
  op("glu", [&] { be.glu(Glu::SwiGLU, big, big2, big2); });
  product("down + add_rms_norm", big, double(L.down.nbytes()),
          [&] { be.linear_add_rms_norm(big, {L.down, none, d}, x, L.in_norm, 1e-5f, 0.0f, h); });
  lin("  linear down 4096x14336", big, L.down, d, false);
  op("  add_rms_norm", [&] { be.add_rms_norm(x, d, L.in_norm, 1e-5f, 0.0f, h); }, false);
  lin("lm_head 128256x4096", last, M.lm_head, logits, false);
  std::printf("  %-26s %10.1f  (x %d layers = %.2f ms)\n", "one layer, sum", layer_us, m.layers,
              layer_us * m.layers / 1e3);
}

// Median seconds of `reps` calls after `warmup` calls.
template <class F>
double median_seconds(int warmup, int reps, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double event_seconds(int reps, const std::function<void()>& f) {
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a), "event");
  ck(cudaEventCreate(&b), "event");
  f();  // warm-up
  ck(cudaEventRecord(a), "record");
  for (int i = 0; i < reps; ++i) f();
  ck(cudaEventRecord(b), "record");
  ck(cudaEventSynchronize(b), "sync");
  float ms = 0;
  ck(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1e3 / reps;
}

// Device-to-device copy, counting bytes read plus bytes written.
double copy_bandwidth() {
  const size_t bytes = size_t(4) << 30;
  void *a, *b;
  ck(cudaMalloc(&a, bytes), "cudaMalloc");
  ck(cudaMalloc(&b, bytes), "cudaMalloc");
  ck(cudaMemset(a, 0x5a, bytes), "cudaMemset");
  double s = event_seconds(10, [&] { ck(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice), "copy"); });
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / s;
}

// cuBLASLt bf16 × bf16 → bf16, f32 accumulate, n × n × n, random inputs.
double gemm_flops(int n) {
  cublasLtHandle_t lt;
  ck(cublasLtCreate(&lt), "cublasLtCreate");
  void *a, *b, *c, *ws;
  size_t elems = size_t(n) * n, ws_bytes = size_t(64) << 20;
  ck(cudaMalloc(&a, elems * 2), "cudaMalloc");
  ck(cudaMalloc(&b, elems * 2), "cudaMalloc");
  ck(cudaMalloc(&c, elems * 2), "cudaMalloc");
  ck(cudaMalloc(&ws, ws_bytes), "cudaMalloc");
  Pool pool(size_t(16) << 20, 1.0f, 3);
  pool.fill(a, elems);
  pool.fill(b, elems);
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  ck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  cublasOperation_t t = CUBLAS_OP_T;
  ck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), "transa");
  ck(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n), "layout");
  ck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n), "layout");
  ck(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n), "layout");
  cublasLtMatmulPreference_t pref;
  ck(cublasLtMatmulPreferenceCreate(&pref), "pref");
  ck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)),
     "pref");
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  ck(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &r, &found), "heuristic");
  TESSERA_CHECK(found > 0, "no cuBLASLt algorithm for the bf16 GEMM");
  const float one = 1, zero = 0;
  double s = event_seconds(10, [&] {
    ck(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, &r.algo, ws, ws_bytes, nullptr), "matmul");
  });
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(ws);
  return 2.0 * double(n) * n * n / s;
}

// Decode steps as the engine runs them on a GPU: the forward recorded once (a CUDA graph), then
// replayed each step.
double replayed_step_seconds(Backend& be, Model& M, int seqs, int context, int steps) {
  const StepInputs in = step_inputs(be, M, seqs, 1, context);
  Tensor logits;
  std::unique_ptr<Recording> rec = be.record([&] { logits = forward(be, M, in); });
  return median_seconds(2, steps, [&] {
    be.replay(*rec);
    draw_greedy(be, M, logits);
  });
}

int run(int argc, char** argv) {
  CLI::App app{"GPU end-to-end benchmark on a random Llama-3.1-8B-shaped bf16 model"};
  int context = 512, prefill = 2048, steps = 10;
  std::vector<int> batch_sizes = {1, 8, 32, 64, 128, 256}, breakdown = {1, 8, 64};
  app.add_option("--context", context, "tokens in each sequence's cache during decode");
  app.add_option("--prefill", prefill, "prompt length of the prefill measurement (0: none)");
  app.add_option("--steps", steps, "timed steps per measurement (median)");
  app.add_option("--batches", batch_sizes, "decode batch sizes to measure")->delimiter(',');
  app.add_option("--breakdown", breakdown, "decode batch sizes whose per-op times are printed")->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  std::string error;
  auto be = load_cuda_backend(0, &error);
  if (!be) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  cudaDeviceProp prop{};
  ck(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);

  const double bw = copy_bandwidth(), flops = gemm_flops(8192);
  std::printf("copy bandwidth (D2D, read+write): %.2f TB/s\n", bw / 1e12);
  std::printf("cuBLASLt bf16 GEMM 8192^3: %.0f TFLOP/s\n", flops / 1e12);

  // Batches whose contexts fit a 64 GiB KV cache (at context 4096: up to 64 sequences).
  const double kv_budget_tokens = 64.0 * (1 << 30) / Shape8B{}.kv_bytes_per_token();
  std::vector<int> batches;
  for (int b : batch_sizes)
    if (double(b) * (context + 16) <= kv_budget_tokens) batches.push_back(b);
  TESSERA_CHECK(!batches.empty(), "no batch size fits the 64 GiB KV budget at this context");
  int kv_tokens = std::max(batches.back() * (context + 16), prefill + 16);
  auto t0 = Clock::now();
  Model M = build_model(*be, kv_tokens);
  const Shape8B& m = M.m;
  double weight_bytes = 2.0 * (m.matmul_params() + double(m.vocab) * m.hidden);
  std::printf("model: %.2f GB of bf16 weights built in %.1f s; bf16 KV cache for %d tokens (%.1f GB)\n",
              weight_bytes / 1e9, seconds_since(t0), kv_tokens, kv_tokens * m.kv_bytes_per_token() / 1e9);

  struct Row {
    std::string what;
    double measured;
    std::string limit;
  };
  std::vector<Row> table;
  char buf[256];
  const double step_bytes = 2.0 * m.matmul_params();  // weights read per decode step
  for (int b : batches) {
    double s = median_seconds(2, steps, [&] { step(*be, M, b, 1, context); });
    double kv_read = double(b) * context * m.kv_bytes_per_token();
    double bound = b / ((step_bytes + kv_read) / bw);
    const char* peer = b == 1    ? "llama.cpp 207, target 258"
                       : b == 8  ? "llama.cpp 1190"
                       : b == 32 ? "llama.cpp 3800, target 6840"
                       : b == 64 ? "llama.cpp 6100, target 11000"
                                 : "";
    std::snprintf(buf, sizeof(buf), "bytes bound %.0f; %s", bound, peer);
    const std::string what = "decode batch " + std::to_string(b) + " (ctx " + std::to_string(context) + ")";
    table.push_back({what + ", tok/s", b / replayed_step_seconds(*be, M, b, context, steps), buf});
    table.push_back({what + " eager", b / s, "ops launched one by one (--enforce-eager)"});
  }
  if (prefill > 0) {
    double s = median_seconds(1, std::max(3, steps / 3), [&] { step(*be, M, 1, prefill, prefill); });
    double attn_flops = 4.0 * m.layers * m.heads * m.head_dim * double(prefill) * prefill / 2;
    double bound = prefill / ((m.matmul_params() * 2.0 * prefill + attn_flops) / flops);
    std::snprintf(buf, sizeof(buf), "GEMM-rate bound %.0f; llama.cpp 25700, target 33000", bound);
    table.push_back({"prefill " + std::to_string(prefill) + " tokens, tok/s", prefill / s, buf});
  }
  for (int b : breakdown)
    if (std::count(batches.begin(), batches.end(), b)) op_breakdown(*be, M, b, 1, context);
  if (prefill > 0) op_breakdown(*be, M, 1, prefill, prefill);
  sampling_times(*be, m.vocab);

  std::printf("\n%-40s %12s   %s\n", "measurement", "measured", "limit / peers");
  std::printf("%-40s %12.2f   %s\n", "copy bandwidth, TB/s", bw / 1e12, "anchor 4.2");
  std::printf("%-40s %12.0f   %s\n", "cuBLASLt bf16 GEMM 8192^3, TFLOP/s", flops / 1e12, "");
  for (auto& r : table) std::printf("%-40s %12.1f   %s\n", r.what.c_str(), r.measured, r.limit.c_str());
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  try {
    return tessera::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
}

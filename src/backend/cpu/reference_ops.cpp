#include "backend/cpu/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/quantization.h"

namespace tessera::cpu::ref {

void to_f32(const Tensor& t, int64_t offset, int64_t n, float* dst) {
  if (t.quantization()) return dequantize(t, offset, n, dst);
  switch (t.dtype()) {
    case DType::F32: std::memcpy(dst, t.data<float>() + offset, size_t(n) * 4); return;
    case DType::BF16: {
      const uint16_t* s = t.data<uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      const uint16_t* s = t.data<uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default: throw Error("to_f32: unsupported dtype " + std::string(dtype_name(t.dtype())));
  }
}

void from_f32(const float* src, int64_t n, Tensor& t, int64_t offset) {
  switch (t.dtype()) {
    case DType::F32: std::memcpy(t.data<float>() + offset, src, size_t(n) * 4); return;
    case DType::BF16: {
      uint16_t* d = t.data<uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      uint16_t* d = t.data<uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default: throw Error("from_f32: unsupported dtype " + std::string(dtype_name(t.dtype())));
  }
}

void embedding(const Tensor& table, const Tensor& ids, float scale, Tensor& out) {
  int64_t T = ids.numel(), D = table.dim(1), V = table.dim(0);
  for (int64_t t = 0; t < T; ++t) {
    int32_t id = ids.data<int32_t>()[t];
    TESSERA_CHECK(id >= 0 && id < V, "token id " + std::to_string(id) + " out of vocabulary range");
    float* o = out.data<float>() + t * D;
    to_f32(table, id * D, D, o);
    for (int64_t i = 0; i < D; ++i) o[i] *= scale;
  }
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out) {
  int64_t D = x.dim(-1), T = x.numel() / D;
  std::vector<float> wf(D);
  to_f32(w, 0, D, wf.data());
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x.data<float>() + t * D;
    float* o = out.data<float>() + t * D;
    float ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += xr[i] * xr[i];
    float inv = 1.0f / std::sqrt(ss / float(D) + eps);
    for (int64_t i = 0; i < D; ++i) o[i] = xr[i] * inv * (wf[i] + offset);
  }
}

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  int64_t K = x.dim(-1), T = x.numel() / K, N = w.dim(0);
  TESSERA_CHECK(w.dim(1) == K, "linear: weight " + shape_str(w.shape()) + " vs input " + shape_str(x.shape()));
  std::vector<float> row(K), b(N, 0.0f);
  if (bias.defined()) to_f32(bias, 0, N, b.data());
  for (int64_t n = 0; n < N; ++n) {
    to_f32(w, n * K, K, row.data());
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x.data<float>() + t * K;
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += xr[k] * row[k];
      out.data<float>()[t * N + n] = acc + b[n];
    }
  }
}

void rope(Tensor& x, const Tensor& positions, const RopeParams& p) {
  int64_t T = x.dim(0), H = x.dim(1), Dh = x.dim(2), half = p.rotary_dim / 2;
  const float* inv_freq = p.inv_freq.data<float>();
  for (int64_t t = 0; t < T; ++t) {
    float pos = float(positions.data<int32_t>()[t]);
    for (int64_t i = 0; i < half; ++i) {
      float angle = pos * inv_freq[i];  // f32 product, as transformers computes it
      float c = std::cos(angle) * p.attention_scaling, s = std::sin(angle) * p.attention_scaling;
      for (int64_t h = 0; h < H; ++h) {
        float* v = x.data<float>() + (t * H + h) * Dh;
        float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void store_kv(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache, Tensor& v_cache) {
  int64_t T = k.dim(0), row = k.numel() / T;
  for (int64_t t = 0; t < T; ++t) {
    int64_t slot = slots.data<int32_t>()[t];
    TESSERA_CHECK(slot < k_cache.dim(0), "store_kv: slot out of range");
    if (slot < 0) continue;
    from_f32(k.data<float>() + t * row, row, k_cache, slot * row);
    from_f32(v.data<float>() + t * row, row, v_cache, slot * row);
  }
}

void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const AttentionMeta& m,
               const AttentionParams& p, Tensor& out) {
  int64_t H = q.dim(1), Dh = q.dim(2), Hkv = k_cache.dim(1), group = H / Hkv;
  const int32_t* starts = m.seq_starts.data<int32_t>();
  const int32_t* ctx = m.context_lens.data<int32_t>();
  const int32_t* tables = m.block_tables.data<int32_t>();
  const int32_t* pos = m.positions.data<int32_t>();
  std::vector<float> scores, kv(size_t(Dh), 0.0f);
  for (int s = 0; s < m.num_seqs; ++s) {
    const int32_t* table = tables + int64_t(s) * m.max_blocks;
    for (int64_t t = starts[s]; t < starts[s + 1]; ++t) {
      int64_t qpos = pos[t];
      int64_t first = p.sliding_window > 0 ? std::max<int64_t>(0, qpos - p.sliding_window + 1) : 0;
      int64_t last = std::min<int64_t>(qpos, ctx[s] - 1);  // causal
      for (int64_t h = 0; h < H; ++h) {
        const float* qv = q.data<float>() + (t * H + h) * Dh;
        int64_t kvh = h / group;
        scores.assign(size_t(std::max<int64_t>(0, last - first + 1)), 0.0f);
        float mx = -INFINITY;
        for (int64_t j = first; j <= last; ++j) {
          int64_t slot = int64_t(table[j / m.block_size]) * m.block_size + j % m.block_size;
          to_f32(k_cache, (slot * Hkv + kvh) * Dh, Dh, kv.data());
          float acc = 0;
          for (int64_t d = 0; d < Dh; ++d) acc += qv[d] * kv[d];
          acc *= p.scale;
          if (p.softcap > 0) acc = p.softcap * std::tanh(acc / p.softcap);
          scores[j - first] = acc;
          mx = std::max(mx, acc);
        }
        float sum = 0;
        for (float& sc : scores) sum += (sc = std::exp(sc - mx));
        float* o = out.data<float>() + (t * H + h) * Dh;
        std::fill(o, o + Dh, 0.0f);
        for (int64_t j = first; j <= last; ++j) {
          int64_t slot = int64_t(table[j / m.block_size]) * m.block_size + j % m.block_size;
          to_f32(v_cache, (slot * Hkv + kvh) * Dh, Dh, kv.data());
          float w = scores[j - first] / sum;
          for (int64_t d = 0; d < Dh; ++d) o[d] += w * kv[d];
        }
      }
    }
  }
}

// GeGLU as PyTorch's gelu(approximate="tanh") writes it; the fast paths use the equal
// g * sigmoid(2 z) form.
void glu(Glu act, const Tensor& gate, const Tensor& up, Tensor& out) {
  int64_t n = gate.numel();
  for (int64_t i = 0; i < n; ++i) {
    float g = gate.data<float>()[i], a;
    if (act == Glu::SwiGLU) {
      a = g / (1.0f + std::exp(-g));
    } else {
      const float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // sqrt(2 / pi)
      a = 0.5f * g * (1.0f + std::tanh(kBeta * (g + kKappa * g * g * g)));
    }
    out.data<float>()[i] = a * up.data<float>()[i];
  }
}

void softcap(Tensor& x, float cap) {
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = cap * std::tanh(p[i] / cap);
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
}

void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  int64_t D = x.numel() / x.dim(0);
  for (int64_t r = 0; r < rows.numel(); ++r) {
    int64_t src = rows.data<int32_t>()[r];
    TESSERA_CHECK(src >= 0 && src < x.dim(0), "gather_rows: row out of range");
    std::memcpy(out.data<float>() + r * D, x.data<float>() + src * D, size_t(D) * 4);
  }
}

void scatter_add_rows(const Tensor& x, const Tensor& rows, const Tensor& weights, Tensor& out) {
  const int64_t D = out.numel() / out.dim(0);
  TESSERA_CHECK(x.numel() == rows.numel() * D && weights.numel() == rows.numel(),
                "scatter_add_rows: x " + shape_str(x.shape()) + ", rows " + shape_str(rows.shape()) + ", weights " +
                    shape_str(weights.shape()) + ", out " + shape_str(out.shape()));
  for (int64_t r = 0; r < rows.numel(); ++r) {
    const int64_t dst = rows.data<int32_t>()[r];
    TESSERA_CHECK(dst >= 0 && dst < out.dim(0), "scatter_add_rows: row out of range");
    const float w = weights.data<float>()[r];
    const float* src = x.data<float>() + r * D;
    float* o = out.data<float>() + dst * D;
    for (int64_t i = 0; i < D; ++i) o[i] += w * src[i];
  }
}

void moe_route(const Tensor& logits, int top_k, bool renormalize, Tensor& ids, Tensor& weights) {
  const int64_t E = logits.dim(-1), T = E ? logits.numel() / E : 0;
  TESSERA_CHECK(logits.dtype() == DType::F32 && top_k >= 1 && top_k <= E && ids.dtype() == DType::I32 &&
                    weights.dtype() == DType::F32 && ids.numel() == T * top_k && weights.numel() == T * top_k,
                "moe_route: logits " + shape_str(logits.shape()) + ", top " + std::to_string(top_k) + ", ids " +
                    shape_str(ids.shape()) + ", weights " + shape_str(weights.shape()));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits.data<float>() + t * E;
    const float mx = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(l[e] - mx);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    int32_t* id = ids.data<int32_t>() + t * top_k;
    float* w = weights.data<float>() + t * top_k;
    float kept = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      id[j] = order[size_t(j)];
      kept += w[j] = std::exp(l[id[j]] - mx) / sum;
    }
    if (renormalize)
      for (int j = 0; j < top_k; ++j) w[j] /= kept;
  }
}

// The host sampler's draw (engine/sampler.cpp; its straightforward form, which
// tests/engine/sampler_reference.h keeps) on the row as given, with its uniform u.
int32_t sample_row(const float* x, int V, const RowSampling& p) {
  if (p.temperature <= 0.0f) return int32_t(std::max_element(x, x + V) - x);  // first maximum on ties
  std::vector<float> l(x, x + V);
  for (float& v : l) v /= p.temperature;
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int k = (p.top_k > 0 && p.top_k < V) ? p.top_k : V;
  auto by_value = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  if (k < V || p.top_p < 1.0f) {
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), by_value);
    idx.resize(size_t(k));
  }
  const float mx = *std::max_element(l.begin(), l.end());
  std::vector<double> probs(idx.size());
  double sum = 0;
  for (size_t i = 0; i < idx.size(); ++i) sum += probs[i] = std::exp(double(l[idx[i]]) - mx);
  for (double& q : probs) q /= sum;
  size_t keep = idx.size();
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (keep = 0; keep < idx.size();) {
      cum += probs[keep++];
      if (cum >= p.top_p) break;
    }
  }
  if (p.min_p > 0.0f) {
    const double top = *std::max_element(probs.begin(), probs.begin() + std::ptrdiff_t(keep));
    size_t j = 0;
    for (size_t i = 0; i < keep; ++i)
      if (probs[i] >= p.min_p * top) idx[j] = idx[i], probs[j++] = probs[i];
    keep = j;
  }
  double u = p.u * std::accumulate(probs.begin(), probs.begin() + std::ptrdiff_t(keep), 0.0);
  for (size_t i = 0; i < keep; ++i) {
    if (u < probs[i]) return idx[i];
    u -= probs[i];
  }
  return idx[keep - 1];
}

void sample_rows(const Tensor& x, const std::vector<RowSampling>& rows, Tensor& out) {
  const int64_t V = x.dim(-1), R = V ? x.numel() / V : 0;
  TESSERA_CHECK(V > 0 && R == int64_t(rows.size()) && out.numel() == R,
                "sample_rows: " + shape_str(x.shape()) + " with " + std::to_string(rows.size()) + " rows into " +
                    shape_str(out.shape()));
  for (int64_t r = 0; r < R; ++r) out.data<int32_t>()[r] = sample_row(x.data<float>() + r * V, int(V), rows[size_t(r)]);
}

void edit_logits(Tensor& x, const std::vector<LogitEdit>& edits) {
  check_logit_edits(x, edits);
  auto at = [&](const LogitEdit& e) -> float& { return x.data<float>()[int64_t(e.row) * x.dim(-1) + e.token]; };
  // One pass per step, as the host sampler makes them: each result goes through memory, so no
  // step can be fused with the next (a multiply-subtract would round once instead of twice).
  for (const LogitEdit& e : edits)
    if (e.ops & LogitEdit::kRepetition) at(e) = at(e) > 0 ? at(e) / e.repetition : at(e) * e.repetition;
  for (const LogitEdit& e : edits)
    if (e.ops & LogitEdit::kSubtract) at(e) -= e.subtract;
  for (const LogitEdit& e : edits)
    if (e.ops & LogitEdit::kAdd) at(e) += e.add;
}

void argmax_rows(const Tensor& x, Tensor& out) {
  const int64_t N = x.dim(-1), R = N ? x.numel() / N : 0;
  TESSERA_CHECK(N > 0 && out.numel() == R, "argmax_rows: " + shape_str(x.shape()) + " into " + shape_str(out.shape()));
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x.data<float>() + r * N;
    int64_t best = 0;
    for (int64_t i = 1; i < N; ++i)
      if (row[best] < row[i]) best = i;  // std::max_element's rule: the first maximum
    out.data<int32_t>()[r] = int32_t(best);
  }
}

void logprobs(const Tensor& x, const Tensor& rows, const Tensor& tokens, int top_n, Tensor& out_lp,
              Tensor& out_ids) {
  check_logprobs_shapes(x, rows, tokens, top_n, out_lp, out_ids);
  const int64_t V = x.dim(-1), R = x.numel() / V;
  std::vector<float> lp(static_cast<size_t>(V));
  std::vector<int32_t> order(static_cast<size_t>(V));
  for (int64_t i = 0; i < rows.numel(); ++i) {
    const int32_t r = rows.data<int32_t>()[i], token = tokens.data<int32_t>()[r];
    TESSERA_CHECK(r >= 0 && r < R && token >= 0 && token < V,
                  "logprobs: row " + std::to_string(r) + " token " + std::to_string(token) + " outside " +
                      shape_str(x.shape()));
    const float* row = x.data<float>() + r * V;
    float mx = row[0];
    for (int64_t j = 1; j < V; ++j) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(double(row[j]) - mx);
    const double lse = mx + std::log(sum);
    float* out = out_lp.data<float>() + i * (1 + top_n);
    out[0] = float(double(row[token]) - lse);
    if (top_n == 0) continue;  // scoring: the token's value only
    for (int64_t j = 0; j < V; ++j) lp[size_t(j)] = float(double(row[j]) - lse);
    std::iota(order.begin(), order.end(), 0);
    if (std::isfinite(lse))
      std::partial_sort(order.begin(), order.begin() + top_n, order.end(), [&](int32_t a, int32_t b) {
        return lp[size_t(a)] > lp[size_t(b)] || (lp[size_t(a)] == lp[size_t(b)] && a < b);
      });
    for (int k = 0; k < top_n; ++k) {
      out[1 + k] = lp[size_t(order[size_t(k)])];
      out_ids.data<int32_t>()[i * top_n + k] = order[size_t(k)];
    }
  }
}

}  // namespace tessera::cpu::ref

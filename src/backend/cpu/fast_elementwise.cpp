// Row-wise and pointwise ops: AVX2 over the row, threads over rows (or over elements) once the
// work is large enough to pay for waking the pool.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/fast_ops.h"
#include "backend/cpu/fast_simd.h"
#include "backend/cpu/reference_ops.h"
#include "core/error.h"
#include "core/quantization.h"

namespace tessera::cpu::fast {
namespace {

// Elements per thread below which another thread costs more than it saves.
constexpr int64_t kMinPerThread = 16384;

// dst[0, n) = src as f32, for a row of an f32/f16/bf16 tensor.
template <class W>
void widen(const typename W::T* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, W::load8(src + i));
  for (; i < n; ++i) dst[i] = W::load1(src + i);
}

// dst[0, n) = src rounded to W's type.
template <class W>
void narrow(const float* src, int64_t n, typename W::T* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) W::store8(dst + i, _mm256_loadu_ps(src + i));
  for (; i < n; ++i) W::store1(dst + i, src[i]);
}

void widen_row(const Tensor& t, int64_t offset, int64_t n, float* dst) {
  if (t.quantization()) return dequantize(t, offset, n, dst);  // a quantized embedding table
  with_weight_type(t.dtype(), [&]<class W>() { widen<W>(static_cast<const typename W::T*>(t.raw()) + offset, n, dst); });
}

}  // namespace

void embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, float scale, Tensor& out) {
  int64_t T = ids.numel(), D = table.dim(1), V = table.dim(0);
  const int32_t* id = ids.data<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    TESSERA_CHECK(id[t] >= 0 && id[t] < V, "token id " + std::to_string(id[t]) + " out of vocabulary range");
  pool.parallel_for(T, std::max<int64_t>(1, kMinPerThread / D), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out.data<float>() + t * D;
      widen_row(table, int64_t(id[t]) * D, D, o);
      if (scale != 1.0f)
        for (int64_t i = 0; i < D; ++i) o[i] *= scale;
    }
  });
}

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out) {
  int64_t D = x.dim(-1), T = x.numel() / D;
  std::vector<float> wf(static_cast<size_t>(D));
  widen_row(w, 0, D, wf.data());
  for (float& v : wf) v += offset;
  pool.parallel_for(T, std::max<int64_t>(1, kMinPerThread / D), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x.data<float>() + t * D;
      float* o = out.data<float>() + t * D;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 16 <= D; i += 16) {
        __m256 v0 = _mm256_loadu_ps(xr + i), v1 = _mm256_loadu_ps(xr + i + 8);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
      }
      float ss = hsum(_mm256_add_ps(a0, a1));
      for (; i < D; ++i) ss += xr[i] * xr[i];
      float inv = 1.0f / std::sqrt(ss / float(D) + eps);
      __m256 iv = _mm256_set1_ps(inv);
      i = 0;
      for (; i + 8 <= D; i += 8)
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), iv), _mm256_loadu_ps(wf.data() + i)));
      for (; i < D; ++i) o[i] = xr[i] * inv * wf[size_t(i)];
    }
  });
}

// Both activations as g * sigmoid(s): s = g for silu, s = 2 sqrt(2 / pi) (g + 0.044715 g^3) for
// gelu's tanh form (0.5 (1 + tanh(z)) = sigmoid(2 z)).
void glu(ThreadPool& pool, Glu act, const Tensor& gate, const Tensor& up, Tensor& out) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* o = out.data<float>();
  const bool gelu = act == Glu::GeGLU;
  const float kTwoBeta = 1.5957691216057308f, kKappa = 0.044715f;
  pool.parallel_for(gate.numel(), kMinPerThread, [&](int64_t i0, int64_t i1) {
    const __m256 one = _mm256_set1_ps(1.0f), two_beta = _mm256_set1_ps(kTwoBeta), kappa = _mm256_set1_ps(kKappa);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
      __m256 gv = _mm256_loadu_ps(g + i), sv = gv;
      if (gelu) sv = _mm256_mul_ps(two_beta, _mm256_fmadd_ps(_mm256_mul_ps(kappa, gv), _mm256_mul_ps(gv, gv), gv));
      __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), sv));
      __m256 a = _mm256_div_ps(gv, _mm256_add_ps(one, e));
      _mm256_storeu_ps(o + i, _mm256_mul_ps(a, _mm256_loadu_ps(u + i)));
    }
    for (; i < i1; ++i) {
      const float s = gelu ? kTwoBeta * (g[i] + kKappa * g[i] * g[i] * g[i]) : g[i];
      o[i] = g[i] / (1.0f + std::exp(-s)) * u[i];
    }
  });
}

// Rows of logits: a scoring step caps every position's row (512 x 256,000 for Gemma 2).
void softcap(ThreadPool& pool, Tensor& x, float cap) {
  float* p = x.data<float>();
  const float inv = 1.0f / cap;
  pool.parallel_for(x.numel(), kMinPerThread, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) p[i] = cap * std::tanh(p[i] * inv);
  });
}

void add(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor& out) {
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* o = out.data<float>();
  pool.parallel_for(a.numel(), 4 * kMinPerThread, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(ap + i), _mm256_loadu_ps(bp + i)));
    for (; i < i1; ++i) o[i] = ap[i] + bp[i];
  });
}

// cos/sin once per (token, frequency), in f32 as transformers computes the angle, then applied
// to every head with AVX2.
void rope(ThreadPool& pool, Tensor& x, const Tensor& positions, const RopeParams& p) {
  int64_t T = x.dim(0), H = x.dim(1), Dh = x.dim(2), half = p.rotary_dim / 2;
  const float* inv_freq = p.inv_freq.data<float>();
  pool.parallel_for(T, std::max<int64_t>(1, kMinPerThread / (H * Dh)), [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(static_cast<size_t>(2 * half));
    float* c = cs.data();
    float* s = cs.data() + half;
    for (int64_t t = t0; t < t1; ++t) {
      float pos = float(positions.data<int32_t>()[t]);
      for (int64_t i = 0; i < half; ++i) {
        float angle = pos * inv_freq[i];
        c[i] = std::cos(angle) * p.attention_scaling;
        s[i] = std::sin(angle) * p.attention_scaling;
      }
      for (int64_t h = 0; h < H; ++h) {
        float* v = x.data<float>() + (t * H + h) * Dh;
        int64_t i = 0;
        for (; i + 8 <= half; i += 8) {
          __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
          __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
          _mm256_storeu_ps(v + i, _mm256_fmsub_ps(a, cv, _mm256_mul_ps(b, sv)));
          _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(b, cv, _mm256_mul_ps(a, sv)));
        }
        for (; i < half; ++i) {
          float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

void store_kv(ThreadPool& pool, const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
              Tensor& v_cache) {
  TESSERA_CHECK(k_cache.dtype() == v_cache.dtype(), "store_kv: k and v caches differ in dtype");
  const int64_t T = k.dim(0), row = T ? k.numel() / T : 0;
  TESSERA_CHECK(T == 0 || k_cache.numel() / k_cache.dim(0) == row,
                "store_kv: cache rows of " + shape_str(k_cache.shape()) + " vs k " + shape_str(k.shape()));
  const int32_t* slot = slots.data<int32_t>();
  for (int64_t t = 0; t < T; ++t) TESSERA_CHECK(slot[t] < k_cache.dim(0), "store_kv: slot out of range");
  with_weight_type(k_cache.dtype(), [&]<class W>() {
    using E = typename W::T;
    pool.parallel_for(T, std::max<int64_t>(1, kMinPerThread / std::max<int64_t>(1, row)), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        if (slot[t] < 0) continue;
        narrow<W>(k.data<float>() + t * row, row, k_cache.data<E>() + slot[t] * row);
        narrow<W>(v.data<float>() + t * row, row, v_cache.data<E>() + slot[t] * row);
      }
    });
  });
}

}  // namespace tessera::cpu::fast

// Paged causal attention. One work item per (new token, kv head): the query heads of the group
// share every key/value row while it is in L1. Scores are kept for the whole visible context
// (softmax in three passes: q·k with AVX2 dot products, exp, then p·v as AVX2 axpy). Caches of
// f16/bf16 are widened to f32 as they are read (exactly), so every cache dtype accumulates in f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/fast_ops.h"
#include "backend/cpu/fast_simd.h"

namespace tessera::cpu::fast {
namespace {

// q · k over n elements; k in the cache's element type W.
template <class W>
inline float dot(const float* a, const typename W::T* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), W::load8(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), W::load8(b + i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), W::load8(b + i), acc0);
    i += 8;
  }
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * W::load1(b + i);
  return s;
}

// o[0, n) += w * v[0, n); v in element type W.
template <class W>
inline void axpy(float w, const typename W::T* v, float* o, int64_t n) {
  __m256 wv = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_fmadd_ps(wv, W::load8(v + i), _mm256_loadu_ps(o + i)));
  for (; i < n; ++i) o[i] += w * W::load1(v + i);
}

// Replaces s[0, n) by exp(s - mx) and returns the sum.
float exp_sub_sum(float* s, int64_t n, float mx) {
  __m256 m = _mm256_set1_ps(mx), sum = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), m));
    _mm256_storeu_ps(s + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  float total = hsum(sum);
  for (; i < n; ++i) total += (s[i] = std::exp(s[i] - mx));
  return total;
}

// One (new token, kv head): its query heads, their outputs, and the visible key positions.
struct Item {
  const float* q;  // [group, Dh]
  float* out;      // [group, Dh]
  const int32_t* table;
  int64_t first, last;  // inclusive; empty when last < first
};

template <class W>
struct Shape {
  const typename W::T* k_cache;
  const typename W::T* v_cache;
  int64_t Hkv, group, Dh, block_size;
};

// Calls fn(position, row) for the cache rows of key positions [first, last] in order.
template <class Fn>
void for_each_row(const int32_t* table, int64_t block_size, int64_t first, int64_t last, Fn&& fn) {
  for (int64_t j = first; j <= last;) {
    int64_t blk = j / block_size, end = std::min(last + 1, (blk + 1) * block_size);
    int64_t row = int64_t(table[blk]) * block_size + j % block_size;
    for (; j < end; ++j, ++row) fn(j, row);
  }
}

// Unnormalised softmax-weighted values over key positions [first, last] for each head h of the
// group: o[h] = sum_j exp(s_j - mx[h]) v_j and l[h] = sum_j exp(s_j - mx[h]). An empty range gives
// mx = -inf, l = 0, o = 0.
template <class W>
void attend_range(const Item& it, int64_t kvh, const Shape<W>& sh, const AttentionParams& p, int64_t first, int64_t last,
                  float* mx, float* l, float* o, std::vector<float>& scores) {
  const int64_t group = sh.group, Dh = sh.Dh, n = std::max<int64_t>(0, last - first + 1);
  std::fill(mx, mx + group, -INFINITY);
  std::fill(l, l + group, 0.0f);
  std::fill(o, o + group * Dh, 0.0f);
  if (n == 0) return;
  scores.resize(size_t(n * group));
  for_each_row(it.table, sh.block_size, first, last, [&](int64_t j, int64_t row) {
    const auto* k = sh.k_cache + (row * sh.Hkv + kvh) * Dh;
    for (int64_t h = 0; h < group; ++h) {
      float s = dot<W>(it.q + h * Dh, k, Dh) * p.scale;
      if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
      scores[size_t(h * n + j - first)] = s;
      mx[h] = std::max(mx[h], s);
    }
  });
  for (int64_t h = 0; h < group; ++h) l[h] = exp_sub_sum(scores.data() + h * n, n, mx[h]);
  for_each_row(it.table, sh.block_size, first, last, [&](int64_t j, int64_t row) {
    const auto* v = sh.v_cache + (row * sh.Hkv + kvh) * Dh;
    for (int64_t h = 0; h < group; ++h) axpy<W>(scores[size_t(h * n + j - first)], v, o + h * Dh, Dh);
  });
}

// out = o / l; no visible key gives zeros, as in the reference.
void normalise(const float* l, const float* o, float* out, int64_t group, int64_t Dh) {
  for (int64_t h = 0; h < group; ++h) {
    float inv = l[h] > 0 ? 1.0f / l[h] : 0.0f;
    for (int64_t d = 0; d < Dh; ++d) out[h * Dh + d] = o[h * Dh + d] * inv;
  }
}

// Keys per chunk below which splitting one item's keys over threads does not pay.
constexpr int64_t kMinKeysPerChunk = 256;

template <class W>
void attention_impl(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                    const AttentionMeta& m, const AttentionParams& p, Tensor& out) {
  using E = typename W::T;
  const int64_t T = q.dim(0), H = q.dim(1), Dh = q.dim(2), Hkv = k_cache.dim(1), group = H / Hkv;
  const Shape<W> sh{k_cache.data<E>(), v_cache.data<E>(), Hkv, group, Dh, m.block_size};
  const int32_t* starts = m.seq_starts.data<int32_t>();
  const int32_t* ctx = m.context_lens.data<int32_t>();
  const int32_t* pos = m.positions.data<int32_t>();
  const int64_t num_items = T * Hkv;
  if (num_items == 0) return;
  std::vector<Item> items(static_cast<size_t>(num_items));
  int64_t longest = 0;
  for (int s = 0; s < m.num_seqs; ++s)
    for (int64_t t = starts[s]; t < starts[s + 1]; ++t) {
      int64_t first = p.sliding_window > 0 ? std::max<int64_t>(0, pos[t] - p.sliding_window + 1) : 0;
      int64_t last = std::min<int64_t>(pos[t], ctx[s] - 1);
      longest = std::max(longest, last - first + 1);
      for (int64_t kvh = 0; kvh < Hkv; ++kvh)
        items[size_t(t * Hkv + kvh)] = {q.data<float>() + (t * H + kvh * group) * Dh,
                                        out.data<float>() + (t * H + kvh * group) * Dh,
                                        m.block_tables.data<int32_t>() + int64_t(s) * m.max_blocks, first, last};
    }

  // Fewer items than threads (decode of one sequence with few kv heads) and long contexts: split
  // each item's keys into chunks on different threads, then merge the partial softmaxes.
  int64_t chunks = 1;
  if (num_items < pool.size())
    chunks = std::min((2 * pool.size() + num_items - 1) / num_items, std::max<int64_t>(1, longest / kMinKeysPerChunk));
  if (chunks <= 1) {
    pool.parallel_for(num_items, 1, [&](int64_t i0, int64_t i1) {
      std::vector<float> scores, ml(size_t(2 * group));
      for (int64_t i = i0; i < i1; ++i) {
        const Item& it = items[size_t(i)];
        attend_range(it, i % Hkv, sh, p, it.first, it.last, ml.data(), ml.data() + group, it.out, scores);
        normalise(ml.data() + group, it.out, it.out, group, Dh);
      }
    });
    return;
  }
  // Per (item, chunk): mx[group], l[group], o[group, Dh].
  const int64_t stride = group * (Dh + 2);
  std::vector<float> partial(size_t(num_items * chunks * stride));
  pool.parallel_for(num_items * chunks, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> scores;
    for (int64_t u = u0; u < u1; ++u) {
      const Item& it = items[size_t(u / chunks)];
      int64_t c = u % chunks, n = std::max<int64_t>(0, it.last - it.first + 1);
      float* part = partial.data() + u * stride;
      attend_range(it, (u / chunks) % Hkv, sh, p, it.first + n * c / chunks, it.first + n * (c + 1) / chunks - 1, part,
                   part + group, part + 2 * group, scores);
    }
  });
  std::vector<float> l(static_cast<size_t>(group)), o(static_cast<size_t>(group * Dh));
  for (int64_t i = 0; i < num_items; ++i) {
    const float* parts = partial.data() + i * chunks * stride;
    std::fill(l.begin(), l.end(), 0.0f);
    std::fill(o.begin(), o.end(), 0.0f);
    for (int64_t h = 0; h < group; ++h) {
      float mx = -INFINITY;
      for (int64_t c = 0; c < chunks; ++c) mx = std::max(mx, parts[c * stride + h]);
      for (int64_t c = 0; c < chunks; ++c) {
        const float* part = parts + c * stride;
        if (part[group + h] == 0) continue;  // empty chunk
        float w = std::exp(part[h] - mx);
        l[size_t(h)] += w * part[group + h];
        axpy<F32W>(w, part + 2 * group + h * Dh, o.data() + h * Dh, Dh);
      }
    }
    normalise(l.data(), o.data(), items[size_t(i)].out, group, Dh);
  }
}

}  // namespace

void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionMeta& m, const AttentionParams& p, Tensor& out) {
  TESSERA_CHECK(k_cache.dtype() == v_cache.dtype(), "attention: k and v caches differ in dtype");
  with_weight_type(k_cache.dtype(), [&]<class W>() { attention_impl<W>(pool, q, k_cache, v_cache, m, p, out); });
}

}  // namespace tessera::cpu::fast

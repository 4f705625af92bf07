// Paged causal attention. One work item per (new token, kv head): the query heads of the group
// share every key/value row while it is in L1. Scores are kept for the whole visible context
// (softmax in three passes: q·k with AVX2 dot products, exp, then p·v as AVX2 axpy).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/fast_ops.h"
#include "backend/cpu/fast_simd.h"

namespace tessera::cpu::fast {
namespace {

inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    i += 8;
  }
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// o[0, n) += w * v[0, n)
inline void axpy(float w, const float* v, float* o, int64_t n) {
  __m256 wv = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
  for (; i < n; ++i) o[i] += w * v[i];
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

struct Item {
  const float* q;  // [group, Dh] query heads of this kv head
  float* out;      // [group, Dh]
  const int32_t* table;
  int64_t first, last;  // visible key positions, inclusive
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

void attend(const Item& it, const float* kc, const float* vc, int64_t Hkv, int64_t kvh, int64_t group, int64_t Dh,
            int64_t block_size, const AttentionParams& p, std::vector<float>& scores) {
  int64_t n = std::max<int64_t>(0, it.last - it.first + 1);
  if (n == 0) {  // no visible key: zeros, as the reference leaves them
    std::fill(it.out, it.out + group * Dh, 0.0f);
    return;
  }
  scores.resize(size_t(n * group));
  std::vector<float> mx(static_cast<size_t>(group), -INFINITY);
  for_each_row(it.table, block_size, it.first, it.last, [&](int64_t j, int64_t row) {
    const float* k = kc + (row * Hkv + kvh) * Dh;
    for (int64_t h = 0; h < group; ++h) {
      float s = dot(it.q + h * Dh, k, Dh) * p.scale;
      if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
      scores[size_t(h * n + j - it.first)] = s;
      mx[size_t(h)] = std::max(mx[size_t(h)], s);
    }
  });
  std::vector<float> inv(static_cast<size_t>(group));
  for (int64_t h = 0; h < group; ++h) {
    inv[size_t(h)] = 1.0f / exp_sub_sum(scores.data() + h * n, n, mx[size_t(h)]);
    std::fill(it.out + h * Dh, it.out + (h + 1) * Dh, 0.0f);
  }
  for_each_row(it.table, block_size, it.first, it.last, [&](int64_t j, int64_t row) {
    const float* v = vc + (row * Hkv + kvh) * Dh;
    for (int64_t h = 0; h < group; ++h) axpy(scores[size_t(h * n + j - it.first)], v, it.out + h * Dh, Dh);
  });
  for (int64_t h = 0; h < group; ++h) {
    float* o = it.out + h * Dh;
    for (int64_t d = 0; d < Dh; ++d) o[d] *= inv[size_t(h)];
  }
}

}  // namespace

void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionMeta& m, const AttentionParams& p, Tensor& out) {
  int64_t T = q.dim(0), H = q.dim(1), Dh = q.dim(2), Hkv = k_cache.dim(1), group = H / Hkv;
  const int32_t* starts = m.seq_starts.data<int32_t>();
  const int32_t* ctx = m.context_lens.data<int32_t>();
  const int32_t* tables = m.block_tables.data<int32_t>();
  const int32_t* pos = m.positions.data<int32_t>();
  std::vector<int32_t> seq_of(static_cast<size_t>(T));
  for (int s = 0; s < m.num_seqs; ++s)
    for (int32_t t = starts[s]; t < starts[s + 1]; ++t) seq_of[size_t(t)] = s;

  pool.parallel_for(T * Hkv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores;
    for (int64_t item = i0; item < i1; ++item) {
      int64_t t = item / Hkv, kvh = item % Hkv;
      int s = seq_of[size_t(t)];
      int64_t qpos = pos[t];
      Item it;
      it.q = q.data<float>() + (t * H + kvh * group) * Dh;
      it.out = out.data<float>() + (t * H + kvh * group) * Dh;
      it.table = tables + int64_t(s) * m.max_blocks;
      it.first = p.sliding_window > 0 ? std::max<int64_t>(0, qpos - p.sliding_window + 1) : 0;
      it.last = std::min<int64_t>(qpos, ctx[s] - 1);
      attend(it, k_cache.data<float>(), v_cache.data<float>(), Hkv, kvh, group, Dh, m.block_size, p, scores);
    }
  });
}

}  // namespace tessera::cpu::fast

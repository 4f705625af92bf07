#include <cmath>
#include <vector>

#include "backend/cpu/fast_ops.h"

namespace tessera::cpu::fast {

// One work item per (new token, kv head): the query heads of a group share each key/value row load.
void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionMeta& m, const AttentionParams& p, Tensor& out) {
  int64_t T = q.dim(0), H = q.dim(1), Dh = q.dim(2), Hkv = k_cache.dim(1), group = H / Hkv;
  const int32_t* starts = m.seq_starts.data<int32_t>();
  const int32_t* ctx = m.context_lens.data<int32_t>();
  const int32_t* tables = m.block_tables.data<int32_t>();
  const int32_t* pos = m.positions.data<int32_t>();
  std::vector<int32_t> seq_of(T);
  for (int s = 0; s < m.num_seqs; ++s)
    for (int32_t t = starts[s]; t < starts[s + 1]; ++t) seq_of[t] = s;

  pool.parallel_for(T * Hkv, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores;
    for (int64_t item = i0; item < i1; ++item) {
      int64_t t = item / Hkv, kvh = item % Hkv;
      int s = seq_of[t];
      const int32_t* table = tables + int64_t(s) * m.max_blocks;
      int64_t qpos = pos[t];
      int64_t first = p.sliding_window > 0 ? std::max<int64_t>(0, qpos - p.sliding_window + 1) : 0;
      int64_t last = std::min<int64_t>(qpos, ctx[s] - 1);
      int64_t n = std::max<int64_t>(0, last - first + 1);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const float* qv = q.data<float>() + (t * H + h) * Dh;
        scores.resize(size_t(n));
        float mx = -INFINITY;
        for (int64_t j = first; j <= last; ++j) {
          int64_t slot = int64_t(table[j / m.block_size]) * m.block_size + j % m.block_size;
          const float* kv = k_cache.data<float>() + (slot * Hkv + kvh) * Dh;
          float acc = 0;
          for (int64_t d = 0; d < Dh; ++d) acc += qv[d] * kv[d];
          acc *= p.scale;
          if (p.softcap > 0) acc = p.softcap * std::tanh(acc / p.softcap);
          scores[j - first] = acc;
          mx = std::max(mx, acc);
        }
        float sum = 0;
        for (float& sc : scores) sum += (sc = std::exp(sc - mx));
        float inv = 1.0f / sum;
        float* o = out.data<float>() + (t * H + h) * Dh;
        std::fill(o, o + Dh, 0.0f);
        for (int64_t j = first; j <= last; ++j) {
          int64_t slot = int64_t(table[j / m.block_size]) * m.block_size + j % m.block_size;
          const float* vv = v_cache.data<float>() + (slot * Hkv + kvh) * Dh;
          float w = scores[j - first] * inv;
          for (int64_t d = 0; d < Dh; ++d) o[d] += w * vv[d];
        }
      }
    }
  });
}

}  // namespace tessera::cpu::fast

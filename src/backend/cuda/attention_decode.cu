// Paged attention for decode steps (one new token per sequence), for f32 or bf16 KV caches.
// One block per (sequence, kv head, key split). A warp takes 32 / L keys at a time, L
// lanes per key: each lane reads 1/L of its key's row (16-byte pieces, interleaved so the L
// lanes read contiguous bytes) and scores it against every query head of the group (q in
// shared memory), so a K row is read once for the group; log2 L shuffles finish each score. The
// group's online softmax then runs across the warp, and the weighted V rows are summed with
// lanes over the head dimension (coalesced rows, 8 loads issued together). L = 1 does the least
// work per key (large batches, where there are blocks enough to fill the GPU; 4 warps a block);
// L = 2 keeps one warp's steps short, so a small batch spreads over many warps (key splits; 8
// warps a block, so that a split's keys take fewer steps of the block). The warps' partial
// results are merged at the end; across the blocks of a split range either in a thread-block
// cluster (compute capability 9+, up to 8 splits: each block's sums in its shared memory, read by
// the others) or by combine_partials.
#include <cmath>

#include "backend/cuda/check.h"
#include "backend/cuda/cluster_merge.cuh"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kMaxGroup = 8, kVBatch = 8;
// Warps a block: `wanted`, halved (to 4 at least) while the warps' merge buffer (warps x group
// x head_dim floats) would pass 32 KB of static shared memory.
__host__ __device__ constexpr int block_warps(int wanted, int group, int dh) {
  int w = wanted;
  while (w > 4 && w * group * dh * 4 > 32768) w /= 2;
  return w;
}

// Key splits of the CUDA-core decode attention merge in one thread-block cluster (its blocks read
// each other's shared memory) where there are 2 to 8 of them (the portable cluster size) on
// compute capability 9+.
inline bool can_merge_in_cluster(int splits) {
  return splits > 1 && splits <= kMaxClusterBlocks && dependent_launch_supported();
}

// Whether `splits` key splits make a small grid (under 16 blocks per SM), which takes the form
// with 2 lanes a key and 8 warps a block.
inline bool small_grid(const AttentionArgs& a, int splits, int sm_count) {
  return int64_t(a.num_seqs) * a.Hkv * splits < 16 * int64_t(sm_count);
}

// kDpl: head dims per lane (Dh / 32); L: lanes per key; kGroup: query heads per kv head, at
// most (4 or 8: the per-head registers are sized by it); kWanted: warps a block (block_warps);
// kCluster: the splits (gridDim.z) form one cluster and merge there.
template <class KV, int kDpl, int L, int kGroup, int kWanted, bool kCluster>
__global__ void __launch_bounds__(block_warps(kWanted, kGroup, 32 * kDpl) * 32)
    decode_kernel(AttentionArgs a, float* partial) {
  constexpr int Dh = 32 * kDpl, kKeysPerStep = 32 / L, kPieces = Dh / 8 / L;
  constexpr int kWarps = block_warps(kWanted, kGroup, Dh);
  // Sized for this head_dim (20 KB at 128 with 4 warps), so that enough blocks stay resident per SM.
  __shared__ __align__(16) float qs[kGroup * Dh];
  __shared__ float ws_ml[kWarps][kGroup][2];
  __shared__ float ws_acc[kWarps][kGroup][Dh];
  // This block's merged sums for the cluster: max and sum per head, and the accumulators (in the
  // first warp's place: each is read only by the thread that writes it).
  __shared__ float block_ml[kCluster ? kGroup : 1][2];
  float(*block_acc)[Dh] = ws_acc[0];

  allow_next();
  // The step's inputs and the keys before this token's were written before the step: read while
  // the previous kernel (which stores this token's key and value, and q) still runs.
  const int seq = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int G = int(a.H / a.Hkv), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = a.seq_starts[seq];
  if (a.seq_starts[seq + 1] <= t) return;  // no new token: the whole block leaves
  const int qpos = a.positions[t];
  const int first = a.sliding_window > 0 ? max(0, qpos - a.sliding_window + 1) : 0;
  const int last = min(qpos, a.context_lens[seq] - 1);
  const int n = max(0, last - first + 1), per = (n + splits - 1) / splits;
  const int begin = first + split * per, end = min(last + 1, begin + per);
  const int32_t* table = a.block_tables + int64_t(seq) * a.max_blocks;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  // Those keys' K and V rows into L2, 128-byte lines (the first loads then wait less).
  constexpr int kLines = (Dh * int(sizeof(KV)) + 127) / 128;
  for (int e = threadIdx.x; e < (end - begin) * kLines; e += kWarps * 32) {
    const int j = begin + e / kLines;
    if (j == qpos) continue;
    const int64_t slot = int64_t(table[j / a.block_size]) * a.block_size + j % a.block_size;
    const int64_t at = (slot * a.Hkv + kvh) * Dh * int64_t(sizeof(KV)) + (e % kLines) * 128;
    prefetch_l2(reinterpret_cast<const char*>(kc) + at);
    prefetch_l2(reinterpret_cast<const char*>(vc) + at);
  }
  wait_for_previous();

  for (int e = threadIdx.x; e < G * Dh; e += kWarps * 32)
    qs[e] = a.q[(int64_t(t) * a.H + int64_t(kvh) * G) * Dh + e];
  __syncthreads();

  float m[kGroup], l[kGroup], acc[kGroup][kDpl];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < kDpl; ++i) acc[g][i] = 0.0f;
  }

  const int key = lane / L, part = lane % L;
  for (int base = begin + kKeysPerStep * warp; base < end; base += kKeysPerStep * kWarps) {
    const int j = base + key;
    const bool valid = j < end;
    const int jj = valid ? j : end - 1;  // keys past the end read the last one and weigh 0
    const int64_t slot = int64_t(table[jj / a.block_size]) * a.block_size + jj % a.block_size;
    const int64_t row = (slot * a.Hkv + kvh) * Dh;

    // This lane's part of the key: pieces of 8 dims at part, part + L, ... (4 loads in flight).
    float s[kGroup];
#pragma unroll
    for (int g = 0; g < kGroup; ++g) s[g] = 0.0f;
#pragma unroll 4
    for (int c = 0; c < kPieces; ++c) {
      float k8[8];
      load8(kc + row + (part + L * c) * 8, k8);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        if (g >= G) continue;
        const float4* q4 = reinterpret_cast<const float4*>(qs + g * Dh + (part + L * c) * 8);
        float4 qa = q4[0], qb = q4[1];
        s[g] += qa.x * k8[0] + qa.y * k8[1] + qa.z * k8[2] + qa.w * k8[3] + qb.x * k8[4] + qb.y * k8[5] +
                qb.z * k8[6] + qb.w * k8[7];
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
#pragma unroll
      for (int o = 1; o < L; o <<= 1) s[g] += __shfl_xor_sync(0xffffffffu, s[g], o);
    // Online softmax over the step's keys (lanes L apart hold different keys).
    float p[kGroup];
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      if (g >= G) continue;
      float v = s[g] * a.scale;
      if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
      v = valid ? v : -INFINITY;
      float mx = v;
#pragma unroll
      for (int o = L; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      float m_new = fmaxf(m[g], mx);  // finite: the first key of a step is always valid
      float corr = expf(m[g] - m_new);
      p[g] = expf(v - m_new);
      float sum = p[g];
#pragma unroll
      for (int o = L; o < 32; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      l[g] = l[g] * corr + sum;
      m[g] = m_new;
#pragma unroll
      for (int i = 0; i < kDpl; ++i) acc[g][i] *= corr;
    }
    // The weighted V rows, lanes over the head dimension, kVBatch rows' loads at a time.
    const int keys = min(kKeysPerStep, end - base);
    for (int k0 = 0; k0 < keys; k0 += kVBatch) {
      float v[kVBatch][kDpl];
#pragma unroll
      for (int u = 0; u < kVBatch; ++u) {
        const int64_t vrow = __shfl_sync(0xffffffffu, row, (k0 + u) * L);
        if constexpr (kDpl == 8) {
          load8(vc + vrow + lane * 8, v[u]);
        } else if constexpr (kDpl == 4 && sizeof(KV) == 2) {
          uint2 raw = __ldg(reinterpret_cast<const uint2*>(vc + vrow + lane * 4));
          const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
          float2 x = __bfloat1622float2(h[0]), y = __bfloat1622float2(h[1]);
          v[u][0] = x.x, v[u][1] = x.y, v[u][2] = y.x, v[u][3] = y.y;
        } else {
#pragma unroll
          for (int i = 0; i < kDpl; ++i) v[u][i] = to_f32(vc[vrow + lane * kDpl + i]);
        }
      }
#pragma unroll
      for (int u = 0; u < kVBatch; ++u) {
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          if (g >= G) continue;
          float pk = __shfl_sync(0xffffffffu, p[g], (k0 + u) * L);
#pragma unroll
          for (int i = 0; i < kDpl; ++i) acc[g][i] += pk * v[u][i];
        }
      }
    }
  }

  // Merge the warps: each leaves its running max, sum and accumulator in shared memory.
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (g >= G) continue;
    if (lane == 0) ws_ml[warp][g][0] = m[g], ws_ml[warp][g][1] = l[g];
#pragma unroll
    for (int i = 0; i < kDpl; ++i) ws_acc[warp][g][lane * kDpl + i] = acc[g][i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * Dh; e += kWarps * 32) {
    const int g = e / Dh, d = e % Dh;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ws_ml[w][g][0]);
    float sum = 0.0f, o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      float mw = ws_ml[w][g][0];
      if (mw == -INFINITY) continue;  // a warp that saw no keys
      float f = expf(mw - mx);
      sum += ws_ml[w][g][1] * f;
      o += ws_acc[w][g][d] * f;
    }
    const int64_t th = int64_t(t) * a.H + int64_t(kvh) * G + g;
    if constexpr (kCluster) {
      block_acc[g][d] = o;
      if (d == 0) block_ml[g][0] = mx, block_ml[g][1] = sum;
    } else if (splits == 1) {
      store_as(a.out, a.out_dtype, th * Dh + d, sum > 0.0f ? o / sum : 0.0f);
    } else {
      float* pp = partial + (th * splits + split) * (Dh + 2);
      pp[d] = o;
      if (d == 0) pp[Dh] = mx, pp[Dh + 1] = sum;
    }
  }
  if constexpr (kCluster) merge_in_cluster(a, t, kvh, &block_ml[0][0], 2, block_acc[0], Dh);
}

template <class KV, int kDpl, int L, int kGroup, int kW>
void launch(const AttentionArgs& a, int splits, bool clustered, float* partial, cudaStream_t s) {
  const dim3 grid(unsigned(a.num_seqs), unsigned(a.Hkv), unsigned(splits));
  const dim3 block(block_warps(kW, kGroup, 32 * kDpl) * 32);
  if constexpr (L == 2) {  // the only clustered form (see launch<KV> below)
    if (clustered) {
      launch_in_clusters(decode_kernel<KV, kDpl, L, kGroup, kW, true>, grid, dim3(1, 1, unsigned(splits)), block, 0,
                         s, a, partial);
      return;
    }
  }
  launch_dependent(decode_kernel<KV, kDpl, L, kGroup, kW, false>, grid, block, 0, s, a, partial);
}

template <class KV, int L, int kGroup, int kW>
void launch(const AttentionArgs& a, int splits, bool clustered, float* partial, cudaStream_t s) {
  switch (a.Dh) {
    case 32: launch<KV, 1, L, kGroup, kW>(a, splits, clustered, partial, s); break;
    case 64: launch<KV, 2, L, kGroup, kW>(a, splits, clustered, partial, s); break;
    case 128: launch<KV, 4, L, kGroup, kW>(a, splits, clustered, partial, s); break;
    default: launch<KV, 8, L, kGroup, kW>(a, splits, clustered, partial, s); break;
  }
}

template <class KV, int L, int kW>
void launch(const AttentionArgs& a, int splits, bool clustered, float* partial, cudaStream_t s) {
  if (a.H / a.Hkv <= 4) launch<KV, L, 4, kW>(a, splits, clustered, partial, s);
  else launch<KV, L, kMaxGroup, kW>(a, splits, clustered, partial, s);
}

// Returns whether the splits merged in a cluster (else combine_partials must).
template <class KV>
bool launch(const AttentionArgs& a, int splits, float* partial, int sm_count, cudaStream_t s) {
  // Measured on the H200 (8B shapes, contexts 512 and 4096, batches 1 to 256): 2 lanes per key
  // is as fast as 4 on small grids and faster than 1 up to ~16 blocks per SM. Key splits come
  // with small grids (under 8 blocks per SM, attention_splits), so only 2 lanes need a cluster
  // form. 8 warps a block there against 4 (decode tok/s, batch 1 / 2 / 4): context 600 220.6 /
  // 378.1 / 801.4 against 212.3 / 365.0 / 786.9, context 4096 205.6 / 329.7 / 645.6 against
  // 193.8 / 329.7 / 630.9; 4 lanes a key with 8 or 16 warps were slower at batch 2 and 4.
  if (small_grid(a, splits, sm_count)) {
    const bool clustered = can_merge_in_cluster(splits);
    launch<KV, 2, 8>(a, splits, clustered, partial, s);
    return clustered;
  }
  launch<KV, 1, 4>(a, splits, false, partial, s);
  return false;
}

}  // namespace

bool decode_attention_applies(const AttentionArgs& a, int max_query_len) {
  bool dims = a.Dh == 32 || a.Dh == 64 || a.Dh == 128 || a.Dh == 256;
  bool cache = a.cache_dtype == DType::F32 || a.cache_dtype == DType::BF16;
  return max_query_len == 1 && dims && cache && a.H % a.Hkv == 0 && a.H / a.Hkv <= kMaxGroup;
}

int decode_attention_splits(const AttentionArgs& a, int splits, int sm_count) {
  // An 8-warp block takes up to 128 keys in one step, so 9-16 splits' keys fit the 8 blocks of one
  // cluster, whose merge costs less than the combine launch. Measured on the H200 (8B shapes,
  // decode tok/s, batch 1 / 2 / 4): context 1000 221 / 380 / 832 against 216 / 370 / 745 with 15
  // splits and the combine, context 600 223 / 382 / 816-841 against 220 / 379 / 806-814.
  const int k = kMaxClusterBlocks;
  const bool fold = splits > k && splits <= 2 * k && small_grid(a, k, sm_count) && can_merge_in_cluster(k);
  return fold ? k : splits;
}

void decode_attention(const AttentionArgs& a, int splits, float* partial, int sm_count, cudaStream_t s) {
  const bool clustered = a.cache_dtype == DType::F32 ? launch<float>(a, splits, partial, sm_count, s)
                                                     : launch<__nv_bfloat16>(a, splits, partial, sm_count, s);
  check_launch("decode attention");
  if (splits > 1 && !clustered) combine_partials(partial, a.T * a.H, splits, a.Dh, a.out, a.out_dtype, s);
}

}  // namespace tessera::cuda

// Paged causal attention (GQA, sliding window, softcap) with an online softmax: the general
// kernel, for any head_dim up to 256, group size up to 32 and f32 or bf16 caches; the backend
// takes the decode kernel (attention_decode.cu) or the tensor-core kernel (attention_tc.cu)
// where they apply. One block per (token, kv head, key split); one warp per query head of the
// group, so the group's warps read each K/V row of the shared kv head together (through L1).
// Lanes split the head dimension: lane l holds dims l, l + 32, ... of q and of the output.
// With splits > 1 each block covers one range of keys and writes an unnormalised partial result
// that combine_partials merges (flash-decoding).
#include <cmath>

#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kKeysPerStep = 4;  // keys scored together: independent loads and reductions in flight

__device__ int sequence_of(const int32_t* seq_starts, int num_seqs, int t) {
  int lo = 0, hi = num_seqs - 1;  // last s with seq_starts[s] <= t
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (seq_starts[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <class KV, int kDims>  // kDims = dims per lane; Dh <= 32 * kDims
__global__ void attention_kernel(AttentionArgs a, float* partial) {
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int lane = threadIdx.x % 32, group = int(a.H / a.Hkv);
  const int h = kvh * group + threadIdx.x / 32;
  const int64_t Dh = a.Dh;
  const int s = sequence_of(a.seq_starts, a.num_seqs, t);
  const int qpos = a.positions[t];
  const int first = a.sliding_window > 0 ? max(0, qpos - a.sliding_window + 1) : 0;
  const int last = min(qpos, a.context_lens[s] - 1);
  const int n = max(0, last - first + 1), per = (n + splits - 1) / splits;
  const int begin = first + split * per, end = min(last + 1, begin + per);
  const int32_t* table = a.block_tables + int64_t(s) * a.max_blocks;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);

  float q[kDims], acc[kDims];
  const float* qr = a.q + (int64_t(t) * a.H + h) * Dh;
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    int d = lane + 32 * i;
    q[i] = d < Dh ? qr[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j0 = begin; j0 < end; j0 += kKeysPerStep) {
    float sc[kKeysPerStep];
    const KV* vrow[kKeysPerStep];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      int j = min(j0 + u, end - 1);  // past the end: recompute the last key, masked below
      int64_t slot = int64_t(table[j / a.block_size]) * a.block_size + j % a.block_size;
      const KV* krow = kc + (slot * a.Hkv + kvh) * Dh;
      vrow[u] = vc + (slot * a.Hkv + kvh) * Dh;
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        int d = lane + 32 * i;
        if (d < Dh) dot += q[i] * to_f32(krow[d]);
      }
      sc[u] = dot;
    }
    float mx = m;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      float v = warp_sum(sc[u]) * a.scale;
      if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
      sc[u] = j0 + u < end ? v : -INFINITY;
      mx = fmaxf(mx, sc[u]);
    }
    float corr = expf(m - mx);
    l *= corr;
#pragma unroll
    for (int i = 0; i < kDims; ++i) acc[i] *= corr;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      float p = expf(sc[u] - mx);
      l += p;
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        int d = lane + 32 * i;
        if (d < Dh) acc[i] += p * to_f32(vrow[u][d]);
      }
    }
    m = mx;
  }

  if (splits == 1) {
    const int64_t o = (int64_t(t) * a.H + h) * Dh;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      int d = lane + 32 * i;
      if (d < Dh) store_as(a.out, a.out_dtype, o + d, acc[i] * inv);
    }
  } else {
    float* p = partial + ((int64_t(t) * a.H + h) * splits + split) * (Dh + 2);
#pragma unroll
    for (int i = 0; i < kDims; ++i) {
      int d = lane + 32 * i;
      if (d < Dh) p[d] = acc[i];
    }
    if (lane == 0) p[Dh] = m, p[Dh + 1] = l;
  }
}

// One block per (token, head): rescales each split's partial sums to the common maximum.
__global__ void combine_kernel(const float* partial, int splits, int64_t Dh, void* out, DType out_dtype) {
  allow_next();
  wait_for_previous();
  const float* p = partial + int64_t(blockIdx.x) * splits * (Dh + 2);
  float mx = -INFINITY;
  for (int k = 0; k < splits; ++k) mx = fmaxf(mx, p[k * (Dh + 2) + Dh]);
  float l = 0.0f;
  for (int k = 0; k < splits; ++k) {
    float mk = p[k * (Dh + 2) + Dh];
    if (mk != -INFINITY) l += p[k * (Dh + 2) + Dh + 1] * expf(mk - mx);
  }
  float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t d = threadIdx.x; d < Dh; d += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < splits; ++k) {
      float mk = p[k * (Dh + 2) + Dh];
      if (mk != -INFINITY) acc += p[k * (Dh + 2) + d] * expf(mk - mx);
    }
    store_as(out, out_dtype, int64_t(blockIdx.x) * Dh + d, acc * inv);
  }
}

template <class KV>
void launch(const AttentionArgs& a, int splits, float* partial, cudaStream_t s) {
  dim3 grid(unsigned(a.T), unsigned(a.Hkv), unsigned(splits));
  unsigned threads = unsigned(32 * (a.H / a.Hkv));
  if (a.Dh <= 32) attention_kernel<KV, 1><<<grid, threads, 0, s>>>(a, partial);
  else if (a.Dh <= 64) attention_kernel<KV, 2><<<grid, threads, 0, s>>>(a, partial);
  else if (a.Dh <= 128) attention_kernel<KV, 4><<<grid, threads, 0, s>>>(a, partial);
  else attention_kernel<KV, 8><<<grid, threads, 0, s>>>(a, partial);
}

}  // namespace

void attention(const AttentionArgs& a, int splits, float* partial, cudaStream_t s) {
  if (a.T == 0) return;
  TESSERA_CHECK(a.Dh <= 256, "attention: head_dim " + std::to_string(a.Dh) + " above 256");
  TESSERA_CHECK(a.H % a.Hkv == 0 && a.H / a.Hkv <= 32,
                "attention: heads per kv head must be at most 32 (H=" + std::to_string(a.H) +
                    ", Hkv=" + std::to_string(a.Hkv) + ")");
  switch (a.cache_dtype) {
    case DType::F32: launch<float>(a, splits, partial, s); break;
    case DType::BF16: launch<__nv_bfloat16>(a, splits, partial, s); break;
    default: throw Error("attention: unsupported KV cache dtype " + std::string(dtype_name(a.cache_dtype)));
  }
  check_launch("attention");
  if (splits > 1) combine_partials(partial, a.T * a.H, splits, a.Dh, a.out, a.out_dtype, s);
}

void combine_partials(const float* partial, int64_t rows, int splits, int64_t Dh, void* out, DType out_dtype,
                      cudaStream_t s) {
  launch_dependent(combine_kernel, dim3(unsigned(rows)), dim3(128), 0, s, partial, splits, Dh, out, out_dtype);
  check_launch("attention combine");
}

}  // namespace tessera::cuda

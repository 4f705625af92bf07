// Row-wise and elementwise kernels: embedding, RMSNorm, RoPE, KV store, SwiGLU, add, gather,
// dtype conversion, bias. Memory-bound: coalesced accesses, one pass each. Those a decode step
// runs between its products are programmatic dependents (launch_dependent): each starts while
// the kernel before it ends and waits for it only before touching memory. One launched plainly
// stops that chain: Qwen3's per-head q/k norms did, twice a layer (4B shape: batch 8 2,190 →
// 2,287 tok/s once they no longer did).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536)); }

template <class T>
__global__ void embedding_kernel(const T* table, const int32_t* ids, int64_t D, int64_t V, float scale, float* out) {
  int64_t t = blockIdx.x;
  int32_t id = ids[t];
  float* o = out + t * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
    o[i] = (id >= 0 && id < V) ? to_f32(table[id * D + i]) * scale : NAN;
}

// Sum over the block (at most 1024 threads); every thread gets the total.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float w = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    w = warp_sum(w);
    if (threadIdx.x == 0) partial[0] = w;
  }
  __syncthreads();
  return partial[0];
}

template <class T, class O>
__global__ void rms_norm_kernel(const float* x, const T* w, float eps, float offset, int64_t D, O* out) {
  allow_next();
  wait_for_previous();
  const float* xr = x + blockIdx.x * D;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
  float inv = 1.0f / sqrtf(block_sum(ss) / float(D) + eps);
  O* o = out + blockIdx.x * D;
  // Each thread rewrites only the elements it read above, so out may alias x.
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) o[i] = from_f32<O>(xr[i] * inv * (to_f32(w[i]) + offset));
}

// delta: `parts` arrays [rows, D], part_stride elements apart, summed into x (the partial
// products of a product's k ranges; one for a plain residual add).
template <class T, class O>
__global__ void add_rms_norm_kernel(float* x, const float* delta, int parts, int64_t part_stride, const T* w,
                                    float eps, float offset, int64_t D, O* out) {
  allow_next();
  wait_for_previous();
  float* xr = x + blockIdx.x * D;
  const float* dr = delta + blockIdx.x * D;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    float d = dr[i];
    for (int p = 1; p < parts; ++p) d += dr[p * part_stride + i];
    float v = xr[i] + d;
    xr[i] = v;
    ss += v * v;
  }
  float inv = 1.0f / sqrtf(block_sum(ss) / float(D) + eps);
  O* o = out + blockIdx.x * D;
  // Each thread rewrites only the elements it read above, so out may alias delta.
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) o[i] = from_f32<O>(xr[i] * inv * (to_f32(w[i]) + offset));
}

// add_rms_norm_kernel (and with delta null rms_norm_kernel) for rows of D % 8 == 0, D <= 8 *
// kGroups * blockDim, 16-byte aligned: each thread keeps its kGroups pieces of 8 elements in
// registers and issues every load before it needs the first (the loops above wait out one round
// trip to memory per pass: ~5 µs for a 4096-wide decode row, 8 µs for rms_norm's 2048 (ncu, H200)).
// The norm's weights are read before the previous kernel ends.
template <class T, class O, int kGroups>
__global__ void add_rms_norm8_kernel(float* x, const float* delta, int parts, int64_t part_stride, const T* w,
                                     float eps, float offset, int64_t D, O* out) {
  auto at = [&](int g) { return (int64_t(g) * blockDim.x + threadIdx.x) * 8; };
  float wv[kGroups][8], v[kGroups][8], d[kGroups][8];
#pragma unroll
  for (int g = 0; g < kGroups; ++g)
    if (at(g) < D) load8(w + at(g), wv[g]);
  allow_next();
  wait_for_previous();
  float* xr = x + blockIdx.x * D;
  const float* dr = delta + blockIdx.x * D;
#pragma unroll
  for (int g = 0; g < kGroups; ++g)
    if (at(g) < D) {
      load8(xr + at(g), v[g]);
      if (delta) load8(dr + at(g), d[g]);
    }
  for (int p = 1; p < parts; ++p)
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
      if (at(g) < D) {
        float e[8];
        load8(dr + p * part_stride + at(g), e);
#pragma unroll
        for (int i = 0; i < 8; ++i) d[g][i] += e[i];
      }
  float ss = 0;
#pragma unroll
  for (int g = 0; g < kGroups; ++g)
    if (at(g) < D) {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (delta) v[g][e] = v[g][e] + d[g][e];
        ss += v[g][e] * v[g][e];
      }
      if (delta) store8(xr + at(g), v[g]);
    }
  const float inv = 1.0f / sqrtf(block_sum(ss) / float(D) + eps);
  O* o = out + blockIdx.x * D;
  // Every element was read above, so out may alias delta.
#pragma unroll
  for (int g = 0; g < kGroups; ++g)
    if (at(g) < D) {
      float r[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) r[e] = v[g][e] * inv * (wv[g][e] + offset);
      store8(o + at(g), r);
    }
}

__global__ void rope_kernel(float* x, const int32_t* positions, const float* inv_freq, float scaling, int64_t H,
                            int64_t Dh, int half) {
  extern __shared__ float cs[];  // cos[half], sin[half]
  float pos = float(positions[blockIdx.x]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float angle = pos * inv_freq[i];  // f32 product, as the reference computes it
    cs[i] = cosf(angle) * scaling;
    cs[half + i] = sinf(angle) * scaling;
  }
  __syncthreads();
  float* xt = x + blockIdx.x * H * Dh;
  for (int64_t j = blockIdx.y * int64_t(blockDim.x) + threadIdx.x; j < H * half; j += int64_t(gridDim.y) * blockDim.x) {
    int64_t h = j / half;
    int i = int(j % half);
    float* v = xt + h * Dh;
    float a = v[i], b = v[i + half], c = cs[i], s = cs[half + i];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

// Token t's cos and sin (scaled) into cs[0, half) and cs[half, 2 half), by the block's threads.
// Positions are the step's inputs: the rope kernels compute the angles while the previous kernel
// (which writes q, k and v) still runs.
__device__ __forceinline__ void rope_angles(const RopeStoreArgs& a, int64_t t, float* cs) {
  const int half = a.rotary_dim / 2;
  const float pos = float(a.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float angle = pos * a.inv_freq[i];
    cs[i] = cosf(angle) * a.scaling;
    cs[half + i] = sinf(angle) * a.scaling;
  }
}

// Element i of q, k or v at p: the sum of the a.parts arrays a.part_stride apart.
__device__ __forceinline__ float parts_sum(const RopeStoreArgs& a, const float* p, int64_t i) {
  float v = p[i];
  for (int part = 1; part < a.parts; ++part) v += p[part * a.part_stride + i];
  return v;
}

// One token per blockIdx.x; its work items (q and k pairs and their dims past rotary_dim, v
// elements) spread over blockIdx.y, about one a thread. The rotation is rope_kernel's, to the bit.
template <class E>
__global__ void rope_store_kv_kernel(RopeStoreArgs a) {
  extern __shared__ float cs[];  // cos[half], sin[half]
  allow_next();
  const int64_t t = blockIdx.x, Dh = a.Dh;
  const int half = a.rotary_dim / 2;
  rope_angles(a, t, cs);
  const int64_t row = a.Hkv * Dh, slot = a.slots[t];
  wait_for_previous();
  __syncthreads();
  const bool store = slot >= 0 && slot < a.num_slots;
  const float* qt = a.q + t * a.ld_q;
  const float* kt = a.k + t * a.ld_kv;
  const float* vt = a.v + t * a.ld_kv;
  float* qo = a.q_out + t * a.H * Dh;
  float* ko = a.k_out ? a.k_out + t * row : nullptr;
  E* kc = static_cast<E*>(a.k_cache) + (store ? slot * row : 0);
  E* vc = static_cast<E*>(a.v_cache) + (store ? slot * row : 0);
  const int64_t kw = Dh - half;  // per head: half rotated pairs, then the dims past rotary_dim
  const int64_t nq = a.H * kw, nk = a.Hkv * kw, n = nq + nk + row;
  auto in = [&](const float* p, int64_t i) { return parts_sum(a, p, i); };
  for (int64_t j = blockIdx.y * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.y) * blockDim.x) {
    if (j < nq) {
      const int64_t o = (j / kw) * Dh, i = j % kw;
      if (i < half) {
        float x0 = in(qt, o + i), x1 = in(qt, o + i + half), c = cs[i], s = cs[half + i];
        qo[o + i] = x0 * c - x1 * s;
        qo[o + i + half] = x1 * c + x0 * s;
      } else if (qo != qt) {
        qo[o + half + i] = in(qt, o + half + i);
      }
    } else if (j < nq + nk) {
      const int64_t h = (j - nq) / kw, i = (j - nq) % kw, o = h * Dh;
      if (i < half) {
        float x0 = in(kt, o + i), x1 = in(kt, o + i + half), c = cs[i], s = cs[half + i];
        float r0 = x0 * c - x1 * s, r1 = x1 * c + x0 * s;
        if (ko) ko[o + i] = r0, ko[o + i + half] = r1;
        if (store) kc[o + i] = from_f32<E>(r0), kc[o + i + half] = from_f32<E>(r1);
      } else {
        const int64_t d = o + half + i;  // past the rotated dims
        if (ko && ko != kt) ko[d] = in(kt, d);
        if (store) kc[d] = from_f32<E>(in(kt, d));
      }
    } else if (store) {
      const int64_t e = j - nq - nk;
      vc[e] = from_f32<E>(in(vt, e));
    }
  }
}

constexpr int kNormRopeWarps = 4;

// rope_store_kv_kernel with each q and k head RMS-normalised first (qk-norm models): one warp a
// head, which reads the head into its row of shared memory, normalises it there and rotates
// the pairs from it, so a q written in place is read whole before it is written. Token
// blockIdx.x; its q heads, then k heads, then v heads (stored only) a warp each over blockIdx.y.
template <class E>
__global__ void __launch_bounds__(kNormRopeWarps * 32) norm_rope_store_kv_kernel(RopeStoreArgs a) {
  extern __shared__ float cs[];  // cos[half], sin[half], then a row of Dh a warp
  allow_next();
  const int64_t t = blockIdx.x, Dh = a.Dh;
  const int half = a.rotary_dim / 2, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  rope_angles(a, t, cs);
  const int64_t row = a.Hkv * Dh, slot = a.slots[t];
  wait_for_previous();
  __syncthreads();
  const int64_t head = int64_t(blockIdx.y) * kNormRopeWarps + warp;
  if (head >= a.H + 2 * a.Hkv) return;
  const bool store = slot >= 0 && slot < a.num_slots;
  auto in = [&](const float* p, int64_t i) { return parts_sum(a, p, i); };
  if (head >= a.H + a.Hkv) {  // a v head: stored as it is
    const int64_t o = (head - a.H - a.Hkv) * Dh;
    if (store)
      for (int64_t d = lane; d < Dh; d += 32)
        static_cast<E*>(a.v_cache)[slot * row + o + d] = from_f32<E>(in(a.v + t * a.ld_kv + o, d));
    return;
  }
  const bool is_q = head < a.H;
  const int64_t o = (is_q ? head : head - a.H) * Dh;
  const float* src = is_q ? a.q + t * a.ld_q + o : a.k + t * a.ld_kv + o;
  const void* w = is_q ? a.q_norm : a.k_norm;
  float* x = cs + 2 * half + warp * Dh;
  float ss = 0.0f;
  for (int64_t d = lane; d < Dh; d += 32) {
    const float v = in(src, d);
    x[d] = v;
    ss += v * v;
  }
  const float inv = 1.0f / sqrtf(warp_sum(ss) / float(Dh) + a.norm_eps);
  for (int64_t d = lane; d < Dh; d += 32) x[d] = x[d] * inv * (load_as(w, a.norm_dtype, d) + a.norm_offset);
  __syncwarp();
  float* out = is_q ? a.q_out + t * a.H * Dh + o : a.k_out ? a.k_out + t * row + o : nullptr;
  E* kc = is_q || !store ? nullptr : static_cast<E*>(a.k_cache) + slot * row + o;
  auto put = [&](int64_t d, float v) {
    if (out) out[d] = v;
    if (kc) kc[d] = from_f32<E>(v);
  };
  for (int i = lane; i < half; i += 32) {
    const float x0 = x[i], x1 = x[i + half], c = cs[i], s = cs[half + i];
    put(i, x0 * c - x1 * s);
    put(i + half, x1 * c + x0 * s);
  }
  for (int64_t d = a.rotary_dim + lane; d < Dh; d += 32) put(d, x[d]);
}

template <class E>
__global__ void store_kv_kernel(const float* k, const float* v, const int32_t* slots, int64_t T, int64_t row,
                                int64_t num_slots, E* kc, E* vc) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < T * row; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = e / row, j = e % row;
    int64_t slot = slots[t];
    if (slot < 0 || slot >= num_slots) continue;
    kc[slot * row + j] = from_f32<E>(k[e]);
    vc[slot * row + j] = from_f32<E>(v[e]);
  }
}

template <bool kGelu, class I, class O>
__global__ void glu_kernel(const I* gate, const I* up, O* out, int64_t n) {
  allow_next();
  wait_for_previous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_f32<O>(glu_times<kGelu>(to_f32(gate[i]), to_f32(up[i])));
}

// 8 elements per thread and 16-byte accesses (n a multiple of 8, pointers 16-byte aligned): the
// prefill's [2048, 14336] runs at the copy bandwidth. gate's and up's rows may lie ld elements
// apart (the halves of one stacked product's rows; glu_rows), out's are width apart. Each thread
// writes only what it read, so out may alias gate or up.
template <bool kGelu, class I, class O>
__global__ void glu8_kernel(const I* gate, const I* up, O* out, int64_t n8, int64_t width8, int64_t ld) {
  allow_next();
  wait_for_previous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    // Dense rows (one row of n) need no division.
    const int64_t r = ld == 8 * width8 ? 0 : i / width8, in = r * ld + 8 * (i - r * width8);
    float g[8], u[8];
    load8(gate + in, g);
    load8(up + in, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = glu_times<kGelu>(g[j], u[j]);
    store8(out + 8 * i, g);
  }
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

template <class E>
__global__ void fold_norm_weight_kernel(E* w, int64_t n, int64_t K, const void* norm, DType norm_dtype,
                                        float offset) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    w[i] = from_f32<E>(to_f32(w[i]) * (load_as(norm, norm_dtype, i % K) + offset));
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t D, int64_t num_rows, float* out) {
  allow_next();
  wait_for_previous();
  int64_t r = blockIdx.x;
  int64_t src = rows[r];
  bool ok = src >= 0 && src < num_rows;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) out[r * D + i] = ok ? x[src * D + i] : NAN;
}

// One block a row of x; the rows are distinct, so no two blocks write one element.
__global__ void scatter_add_rows_kernel(const float* x, const int32_t* rows, const float* weights, int64_t D,
                                        int64_t num_rows, float* out) {
  allow_next();
  wait_for_previous();
  const int64_t r = blockIdx.x, dst = rows[r];
  if (dst < 0 || dst >= num_rows) return;
  const float w = weights[r];
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) out[dst * D + i] += w * x[r * D + i];
}

template <class E>
__global__ void split_columns_kernel(const E* x, int64_t T, int64_t N, StackedParts g) {
  allow_next();
  wait_for_previous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < T * N; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / N, n = i % N;
    const PartRow part = part_row(g, n);
    static_cast<E*>(part.out)[t * part.width + n - part.first] = x[i];
  }
}

// 8 columns per thread, 16-byte accesses (every part's width a multiple of 8, pointers 16-byte
// aligned): the decode batches' q/k/v scatter (H200, 8B shapes, 64 tokens: the product and its
// scatter 21.6 µs against 23.0 with one element a thread).
template <class E>
__global__ void split_columns8_kernel(const E* x, int64_t T, int64_t N, StackedParts g) {
  allow_next();
  wait_for_previous();
  const int64_t N8 = N / 8;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < T * N8; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / N8, n = i % N8 * 8;
    const PartRow part = part_row(g, n);
    float f[8];
    load8(x + t * N + n, f);
    store8(static_cast<E*>(part.out) + t * part.width + n - part.first, f);
  }
}

// The row-wise argmax in two passes, so that a few rows (a decode step's) still spread over the
// GPU: one block per (column range, row) finds its range's first maximum, then one warp per row
// merges the ranges'. One block per row took 30 µs for one row of 128,256 on the H200.
constexpr int kArgmaxThreads = 256;

// Keeps the larger of (v, i) and (w, j), the lower column on ties; column -1: none yet.
__device__ __forceinline__ void keep_better(float& v, int64_t& i, float w, int64_t j) {
  if (j >= 0 && (i < 0 || v < w || (!(w < v) && j < i))) v = w, i = j;
}

__device__ __forceinline__ void warp_best(float& v, int64_t& i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_down_sync(0xffffffffu, v, o);
    const int64_t j = __shfl_down_sync(0xffffffffu, i, o);
    keep_better(v, i, w, j);
  }
}

// Block (s, r): the first maximum of row r's columns [s N / S, (s + 1) N / S) (S = gridDim.x), or
// with kVec (rows of whole 16-byte pieces) of its pieces [s N / 4S, (s + 1) N / 4S), read 16
// bytes a load: a 64-row step's argmax took 15.5 µs with one float a load.
template <bool kVec>
__global__ void __launch_bounds__(kArgmaxThreads) argmax_part_kernel(const float* x, int64_t N, float* part_v,
                                                                      int32_t* part_i) {
  __shared__ float best_v[kArgmaxThreads / 32];
  __shared__ int64_t best_i[kArgmaxThreads / 32];
  allow_next();
  wait_for_previous();
  const int64_t S = gridDim.x, s = blockIdx.x, r = blockIdx.y;
  const float* row = x + r * N;
  float v = -INFINITY;
  int64_t i = -1;
  // A thread visits its columns in increasing order, so it keeps their first maximum.
  auto see = [&](float w, int64_t c) {
    if (i < 0 || v < w) v = w, i = c;
  };
  if constexpr (kVec) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int64_t n4 = N / 4;
#pragma unroll 4
    for (int64_t c = s * n4 / S + threadIdx.x; c < (s + 1) * n4 / S; c += kArgmaxThreads) {
      const float4 q = row4[c];
      see(q.x, 4 * c), see(q.y, 4 * c + 1), see(q.z, 4 * c + 2), see(q.w, 4 * c + 3);
    }
  } else {
#pragma unroll 4
    for (int64_t c = s * N / S + threadIdx.x; c < (s + 1) * N / S; c += kArgmaxThreads) see(row[c], c);
  }
  warp_best(v, i);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) best_v[warp] = v, best_i[warp] = i;
  __syncthreads();
  if (warp > 0) return;
  v = lane < kArgmaxThreads / 32 ? best_v[lane] : -INFINITY;
  i = lane < kArgmaxThreads / 32 ? best_i[lane] : -1;
  warp_best(v, i);
  if (lane == 0) part_v[r * S + s] = v, part_i[r * S + s] = int32_t(i);
}

// One warp per row: the best of its S ranges'.
__global__ void argmax_merge_kernel(const float* part_v, const int32_t* part_i, int S, int32_t* out) {
  allow_next();
  wait_for_previous();
  const int64_t r = blockIdx.x;
  float v = -INFINITY;
  int64_t i = -1;
  for (int k = threadIdx.x; k < S; k += 32) keep_better(v, i, part_v[r * S + k], part_i[r * S + k]);
  warp_best(v, i);
  if (threadIdx.x == 0) out[r] = int32_t(i);
}

template <class T>
__global__ void convert_kernel(const float* x, int64_t n, T* out) {
  allow_next();
  wait_for_previous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_f32<T>(x[i]);
}

// 8 elements per thread, 16-byte stores (n a multiple of 8, pointers 16-byte aligned).
template <class T>
__global__ void convert8_kernel(const float* x, int64_t n8, T* out) {
  allow_next();
  wait_for_previous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    float f[8];
    load8(x + 8 * i, f);
    store8(out + 8 * i, f);
  }
}

template <class E, class O>
__global__ void add_bias_kernel(O* out, const E* bias, int64_t T, int64_t N) {
  allow_next();
  wait_for_previous();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < T * N; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_f32<O>(to_f32(out[i]) + to_f32(bias[i % N]));
}

int row_threads(int64_t D) { return D >= 4096 ? 512 : D >= 1024 ? 256 : D >= 256 ? 128 : 64; }

}  // namespace

// Calls f with w as a typed pointer of its dtype.
template <class F>
void with_weight(const void* w, DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::F32: f(static_cast<const float*>(w)); break;
    case DType::BF16: f(static_cast<const __nv_bfloat16*>(w)); break;
    case DType::F16: f(static_cast<const __half*>(w)); break;
    default: throw Error(std::string(op) + ": unsupported weight dtype " + std::string(dtype_name(dt)));
  }
}
// Calls f with an activation as a typed pointer of its dtype (f32, bf16 or f16).
template <class F>
void with_activation(void* p, DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::F32: f(static_cast<float*>(p)); break;
    case DType::BF16: f(static_cast<__nv_bfloat16*>(p)); break;
    case DType::F16: f(static_cast<__half*>(p)); break;
    default: throw Error(std::string(op) + ": unsupported activation dtype " + std::string(dtype_name(dt)));
  }
}

void embedding(const void* table, DType dt, const int32_t* ids, int64_t T, int64_t D, int64_t V, float scale,
               float* out, cudaStream_t s) {
  if (T == 0) return;
  int th = row_threads(D);
  with_weight(table, dt, "embedding", [&](auto* t) { embedding_kernel<<<T, th, 0, s>>>(t, ids, D, V, scale, out); });
  check_launch("embedding");
}

void rms_norm(const float* x, const void* w, DType dt, float eps, float offset, int64_t rows, int64_t D, void* out,
              DType out_dt, cudaStream_t s) {
  if (rows == 0) return;
  const bool by8 = D % 8 == 0 && D <= 8192 && aligned16(x) && aligned16(w) && aligned16(out);
  const int groups = D <= 2048 ? 1 : D <= 4096 ? 2 : 4;
  // add_rms_norm8_kernel without a delta: x is only read. Threads for the row's pieces of 8.
  const int64_t pieces = (D + 8 * groups - 1) / (8 * groups);
  const int threads = int(std::clamp<int64_t>((pieces + 31) / 32 * 32, 32, 256));
  with_weight(w, dt, "rms_norm", [&](auto* wt) {
    with_activation(out, out_dt, "rms_norm", [&](auto* o) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(wt)>>;
      using O = std::remove_pointer_t<decltype(o)>;
      float* xr = const_cast<float*>(x);
      const float* no_delta = nullptr;
      auto launch8 = [&](auto kernel) {
        launch_dependent(kernel, dim3(unsigned(rows)), dim3(unsigned(threads)), 0, s, xr, no_delta, 1, int64_t(0), wt,
                         eps, offset, D, o);
      };
      if (!by8)
        launch_dependent(rms_norm_kernel<T, O>, dim3(unsigned(rows)), dim3(row_threads(D)), 0, s, x, wt, eps, offset,
                         D, o);
      else if (groups == 1) launch8(add_rms_norm8_kernel<T, O, 1>);
      else if (groups == 2) launch8(add_rms_norm8_kernel<T, O, 2>);
      else launch8(add_rms_norm8_kernel<T, O, 4>);
    });
  });
  check_launch("rms_norm");
}

void add_rms_norm(float* x, const float* delta, int parts, int64_t part_stride, const void* w, DType dt, float eps,
                  float offset, int64_t rows, int64_t D, void* out, DType out_dt, cudaStream_t s) {
  if (rows == 0) return;
  const bool by8 = D % 8 == 0 && part_stride % 4 == 0 && aligned16(x) && aligned16(delta) && aligned16(w) &&
                   aligned16(out);
  const int groups = !by8 ? 0 : D <= 2048 ? 1 : D <= 4096 ? 2 : D <= 8192 ? 4 : 0;
  with_weight(w, dt, "add_rms_norm", [&](auto* wt) {
    with_activation(out, out_dt, "add_rms_norm", [&](auto* o) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(wt)>>;
      using O = std::remove_pointer_t<decltype(o)>;
      const dim3 grid = dim3(unsigned(rows)), block = dim3(256);
      auto launch = [&](auto kernel, dim3 threads) {
        launch_dependent(kernel, grid, threads, 0, s, x, delta, parts, part_stride, wt, eps, offset, D, o);
      };
      if (groups == 1) launch(add_rms_norm8_kernel<T, O, 1>, block);
      else if (groups == 2) launch(add_rms_norm8_kernel<T, O, 2>, block);
      else if (groups == 4) launch(add_rms_norm8_kernel<T, O, 4>, block);
      else launch(add_rms_norm_kernel<T, O>, dim3(row_threads(D)));
    });
  });
  check_launch("add_rms_norm");
}

void rope(float* x, const int32_t* positions, const float* inv_freq, float scaling, int64_t T, int64_t H,
          int64_t Dh, int rotary_dim, cudaStream_t s) {
  int half = rotary_dim / 2;
  if (T == 0 || half == 0) return;
  // Few tokens (decode): spread each token's heads over several blocks.
  dim3 grid(unsigned(T), unsigned(std::min<int64_t>((H * half + 255) / 256, std::max<int64_t>(1, 256 / T))));
  rope_kernel<<<grid, 256, size_t(2 * half) * sizeof(float), s>>>(x, positions, inv_freq, scaling, H, Dh, half);
  check_launch("rope");
}

void store_kv(const float* k, const float* v, const int32_t* slots, int64_t T, int64_t row, int64_t num_slots,
              void* kc, void* vc, DType dt, cudaStream_t s) {
  if (T == 0) return;
  int g = blocks_for(T * row);
  switch (dt) {
    case DType::F32:
      store_kv_kernel<<<g, kThreads, 0, s>>>(k, v, slots, T, row, num_slots, static_cast<float*>(kc),
                                             static_cast<float*>(vc));
      break;
    case DType::BF16:
      store_kv_kernel<<<g, kThreads, 0, s>>>(k, v, slots, T, row, num_slots, static_cast<__nv_bfloat16*>(kc),
                                             static_cast<__nv_bfloat16*>(vc));
      break;
    case DType::F16:
      store_kv_kernel<<<g, kThreads, 0, s>>>(k, v, slots, T, row, num_slots, static_cast<__half*>(kc),
                                             static_cast<__half*>(vc));
      break;
    default: throw Error("store_kv: unsupported cache dtype " + std::string(dtype_name(dt)));
  }
  check_launch("store_kv");
}

void rope_store_kv(const RopeStoreArgs& a, cudaStream_t s) {
  if (a.T == 0) return;
  const int half = a.rotary_dim / 2;
  if (a.q_norm) {
    const int64_t heads = a.H + 2 * a.Hkv;
    const dim3 grid(unsigned(a.T), unsigned((heads + kNormRopeWarps - 1) / kNormRopeWarps));
    const size_t smem = size_t(2 * std::max(half, 1) + kNormRopeWarps * a.Dh) * sizeof(float);
    with_activation(a.k_cache, a.cache_dtype, "rope_store_kv", [&](auto* k_cache) {
      using E = std::remove_pointer_t<decltype(k_cache)>;
      launch_dependent(norm_rope_store_kv_kernel<E>, grid, dim3(kNormRopeWarps * 32), smem, s, a);
    });
    check_launch("rope_store_kv");
    return;
  }
  const int64_t items = (a.H + a.Hkv) * (a.Dh - half) + a.Hkv * a.Dh;
  // About one item a thread: the items of a token spread over several blocks.
  dim3 grid(unsigned(a.T), unsigned(std::min<int64_t>((items + 255) / 256, 65535)));
  const size_t smem = size_t(2 * std::max(half, 1)) * sizeof(float);
  with_activation(a.k_cache, a.cache_dtype, "rope_store_kv", [&](auto* k_cache) {
    using E = std::remove_pointer_t<decltype(k_cache)>;
    launch_dependent(rope_store_kv_kernel<E>, grid, dim3(256), smem, s, a);
  });
  check_launch("rope_store_kv");
}

namespace {

// act(gate) * up over `rows` rows of `width` elements, gate's and up's rows ld apart, out's
// width apart (one dense row: rows 1, width = ld = n). Strided rows take the 8-wide kernel only
// (glu_rows checks its conditions).
template <bool kGelu>
void launch_glu(const void* gate, const void* up, DType in_dt, int64_t rows, int64_t width, int64_t ld, void* out,
                DType out_dt, cudaStream_t s) {
  const int64_t n = rows * width;
  const bool by8 = width % 8 == 0 && ld % 8 == 0 && aligned16(gate) && aligned16(up) && aligned16(out);
  with_weight(gate, in_dt, "glu", [&](auto* g) {
    const auto* u = static_cast<decltype(g)>(up);
    with_activation(out, out_dt, "glu", [&](auto* o) {
      using I = std::remove_const_t<std::remove_pointer_t<decltype(g)>>;
      using O = std::remove_pointer_t<decltype(o)>;
      if (by8) launch_dependent(glu8_kernel<kGelu, I, O>, dim3(blocks_for(n / 8)), dim3(kThreads), 0, s, g, u, o, n / 8,
                                  width / 8, ld);
      else launch_dependent(glu_kernel<kGelu, I, O>, dim3(blocks_for(n)), dim3(kThreads), 0, s, g, u, o, n);
    });
  });
}

void launch_glu(Glu act, const void* gate, const void* up, DType in_dt, int64_t rows, int64_t width, int64_t ld,
                void* out, DType out_dt, cudaStream_t s) {
  if (rows * width == 0) return;
  if (act == Glu::GeGLU) launch_glu<true>(gate, up, in_dt, rows, width, ld, out, out_dt, s);
  else launch_glu<false>(gate, up, in_dt, rows, width, ld, out, out_dt, s);
  check_launch("glu");
}

}  // namespace

void glu(Glu act, const void* gate, const void* up, DType in_dt, void* out, DType out_dt, int64_t n, cudaStream_t s) {
  launch_glu(act, gate, up, in_dt, 1, n, n, out, out_dt, s);
}

bool glu_rows(Glu act, const void* gate, const void* up, DType in_dt, int64_t rows, int64_t width, int64_t ld,
              void* out, DType out_dt, cudaStream_t s) {
  if (width % 8 || ld % 8 || !aligned16(gate) || !aligned16(up) || !aligned16(out)) return false;
  launch_glu(act, gate, up, in_dt, rows, width, ld, out, out_dt, s);
  return true;
}

void softcap(float* x, int64_t n, float cap, cudaStream_t s) {
  if (n == 0) return;
  softcap_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, cap);
  check_launch("softcap");
}

void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
  check_launch("add");
}

void fold_norm_weight(void* w, DType dt, int64_t N, int64_t K, const void* norm, DType norm_dtype,
                      float offset, cudaStream_t s) {
  if (N * K == 0) return;
  with_activation(w, dt, "fold_norm_weight", [&](auto* e) {
    fold_norm_weight_kernel<<<blocks_for(N * K), kThreads, 0, s>>>(e, N * K, K, norm, norm_dtype, offset);
  });
  check_launch("fold_norm_weight");
}

void gather_rows(const float* x, const int32_t* rows, int64_t R, int64_t D, int64_t num_rows, float* out,
                 cudaStream_t s) {
  if (R == 0) return;
  launch_dependent(gather_rows_kernel, dim3(unsigned(R)), dim3(row_threads(D)), 0, s, x, rows, D, num_rows, out);
  check_launch("gather_rows");
}

void scatter_add_rows(const float* x, const int32_t* rows, const float* weights, int64_t R, int64_t D,
                      int64_t num_rows, float* out, cudaStream_t s) {
  if (R == 0) return;
  launch_dependent(scatter_add_rows_kernel, dim3(unsigned(R)), dim3(row_threads(D)), 0, s, x, rows, weights, D,
                   num_rows, out);
  check_launch("scatter_add_rows");
}

void convert_f32(const float* x, int64_t n, void* out, DType dt, cudaStream_t s) {
  if (n == 0) return;
  const bool by8 = n % 8 == 0 && aligned16(x) && aligned16(out);
  auto run = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    if (by8) launch_dependent(convert8_kernel<T>, dim3(blocks_for(n / 8)), dim3(kThreads), 0, s, x, n / 8, o);
    else launch_dependent(convert_kernel<T>, dim3(blocks_for(n)), dim3(kThreads), 0, s, x, n, o);
  };
  if (dt == DType::BF16) run(static_cast<__nv_bfloat16*>(out));
  else if (dt == DType::F16) run(static_cast<__half*>(out));
  else throw Error("convert_f32: unsupported dtype " + std::string(dtype_name(dt)));
  check_launch("convert_f32");
}

int argmax_splits(int64_t R, int64_t N, int sm_count) {
  // About four blocks an SM, each range at least 2048 columns (8 KB).
  const int64_t want = (4 * int64_t(sm_count) + R - 1) / std::max<int64_t>(R, 1);
  return int(std::clamp<int64_t>(std::min(want, N / 2048), 1, 65535));
}

void argmax_rows(const float* x, int64_t R, int64_t N, int splits, float* scratch, int32_t* out, cudaStream_t s) {
  if (R == 0) return;
  float* part_v = scratch;
  int32_t* part_i = reinterpret_cast<int32_t*>(scratch + R * splits);
  void (*part)(const float*, int64_t, float*, int32_t*) =
      N % 4 == 0 && aligned16(x) ? argmax_part_kernel<true> : argmax_part_kernel<false>;
  launch_dependent(part, dim3(unsigned(splits), unsigned(R)), dim3(kArgmaxThreads), 0, s, x, N, part_v, part_i);
  launch_dependent(argmax_merge_kernel, dim3(unsigned(R)), dim3(32), 0, s, static_cast<const float*>(part_v),
                   static_cast<const int32_t*>(part_i), splits, out);
  check_launch("argmax_rows");
}

void split_columns(const void* x, DType dt, int64_t T, const StackedParts& parts, cudaStream_t s) {
  const int64_t N = parts.rows_end[parts.count - 1];
  if (T * N == 0) return;
  bool by8 = N % 8 == 0 && aligned16(x);
  for (int p = 0; p < parts.count; ++p)
    by8 = by8 && (parts.rows_end[p] - (p ? parts.rows_end[p - 1] : 0)) % 8 == 0 && aligned16(parts.out[p]);
  with_weight(x, dt, "split_columns", [&](auto* xt) {
    using E = std::remove_cv_t<std::remove_pointer_t<decltype(xt)>>;
    if (by8)
      launch_dependent(split_columns8_kernel<E>, dim3(blocks_for(T * N / 8)), dim3(kThreads), 0, s, xt, T, N, parts);
    else
      launch_dependent(split_columns_kernel<E>, dim3(blocks_for(T * N)), dim3(kThreads), 0, s, xt, T, N, parts);
  });
  check_launch("split_columns");
}

void add_bias(void* out, DType out_dt, const void* bias, DType dt, int64_t T, int64_t N, cudaStream_t s) {
  if (T * N == 0) return;
  int g = blocks_for(T * N);
  with_weight(bias, dt, "add_bias", [&](auto* b) {
    with_activation(out, out_dt, "add_bias", [&](auto* o) {
      using E = std::remove_const_t<std::remove_pointer_t<decltype(b)>>;
      using O = std::remove_pointer_t<decltype(o)>;
      launch_dependent(add_bias_kernel<E, O>, dim3(unsigned(g)), dim3(kThreads), 0, s, o, b, T, N);
    });
  });
  check_launch("add_bias");
}

}  // namespace tessera::cuda

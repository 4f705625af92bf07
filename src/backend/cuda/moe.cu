// A mixture of experts' steps wholly on the GPU, with no host round trip, so that a decode step
// with experts is recorded as a CUDA graph like any other:
//  - route: one warp a token picks its top k experts by router logit, with their softmax
//    probabilities;
//  - group: one block gives each (token, choice) pair its place among its expert's pairs (counts,
//    a scan, then places handed out by atomics: each pair's products are computed on their own,
//    so the order of the places changes no result) and lists the experts chosen, each with its
//    range of places (one 16-byte load for the products' blocks);
//  - gate/up, then down: per chosen expert, a warp per weight row or two (gemv.cu's form: 16-byte
//    loads, f32 activations) multiplies them with the rows of up to 8 of the expert's pairs a
//    pass, so an expert's weights are read from memory once however many tokens chose it;
//    with 16-bit experts from 8 tokens on Hopper, moe_tiles.cu's tensor-core tiles instead;
//  - combine: each token's k outputs, weighted, added to x in choice order, a thread a column.
// Measured on the H200 (ncu, Qwen3-30B-A3B's shape, one token, µs a layer): the combine took 29.7
// as a block a token (a round trip to memory per column), 3.6 as a thread a column; the route 9.1
// as a block a token, 8.7 as a warp with shuffles. Each choice as two warp reductions (redux.sync)
// took the engine's one-token decode from 1,028 to 1,049-1,058 tok/s.
#include <algorithm>
#include <cmath>

#include "backend/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kRouteWarps = 4;  // tokens a block of the route
constexpr int kGroupThreads = 1024;
constexpr int kWarps = 8;  // warps a block of the products

// A float as an unsigned key in the same order (-0 as +0, so that equal values tie); 0 is below
// every key, for "none".
__device__ __forceinline__ unsigned order_key(float v) {
  const unsigned u = __float_as_uint(v + 0.0f);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ float key_value(unsigned key) {
  return __uint_as_float(key & 0x80000000u ? key & 0x7fffffffu : ~key);
}

// Warp t % kRouteWarps of block t / kRouteWarps: token t's logits [E] → ids and weights [t, 0..k).
// Lane l holds logits l, l + 32, ... (in shared memory, with their taken flags, which only it
// reads). Each choice is two warp reductions (redux.sync): the largest key, then the lowest
// index holding it, so ties go to the lower expert; the choice's value is then known to every
// lane, and so are the probabilities.
__global__ void __launch_bounds__(kRouteWarps * 32)
    route_kernel(const float* __restrict__ logits, int64_t T, int E, int k, bool renormalize,
                 int32_t* __restrict__ ids, float* __restrict__ weights) {
  extern __shared__ float smem[];  // kRouteWarps rows of E logits, then as many of E taken flags
  wait_for_previous();
  allow_next();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = int64_t(blockIdx.x) * kRouteWarps + warp;
  if (t >= T) return;
  float* l = smem + warp * E;
  unsigned char* taken = reinterpret_cast<unsigned char*>(smem + kRouteWarps * E) + warp * E;
  const float* row = logits + t * E;
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) l[e] = row[e], taken[e] = 0, mx = fmaxf(mx, l[e]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.0f;
  for (int e = lane; e < E; e += 32) sum += expf(l[e] - mx);
  sum = warp_sum(sum);
  float p_mine[kMaxExpertsPerToken / 32] = {};  // lane j % 32 keeps choice j's probability
  float kept = 0.0f;                              // in choice order
  for (int j = 0; j < k; ++j) {
    unsigned key = 0;
    for (int e = lane; e < E; e += 32)
      if (!taken[e]) key = max(key, order_key(l[e]));
    const unsigned best = __reduce_max_sync(0xffffffffu, key);
    unsigned mine = unsigned(E);
    for (int e = lane; e < E; e += 32)
      if (!taken[e] && order_key(l[e]) == best) {
        mine = unsigned(e);
        break;
      }
    const int i = int(__reduce_min_sync(0xffffffffu, mine));
    if (lane == i % 32) taken[i] = 1;
    if (lane == 0) ids[t * k + j] = i;
    const float p = expf(key_value(best) - mx) / sum;
    kept += p;
#pragma unroll
    for (int q = 0; q < kMaxExpertsPerToken / 32; ++q)
      if (j == q * 32 + lane) p_mine[q] = p;
  }
#pragma unroll
  for (int q = 0; q < kMaxExpertsPerToken / 32; ++q)
    if (q * 32 + lane < k) weights[t * k + q * 32 + lane] = renormalize ? p_mine[q] / kept : p_mine[q];
}

// Where the grouping leaves its results: slot s < n (n experts chosen) holds the s-th chosen
// expert e (ascending) and its places [begin, end); the slots past n hold e = -1.
// With tiles, each chosen expert's places also in tiles of up to tile_tokens: (e, begin, end, 0),
// the tiles past the last holding e = -1.
struct Groups {
  int4* slots;       // [num_slots = min(E, P)]: (e, begin, end, 0)
  int32_t* place;    // [P]: pair p's row in the products' outputs (-1: an id out of range)
  int32_t* pair_at;  // [P]: the pair at each place (-1 for the places past the last)
  int num_slots;
  int4* tiles = nullptr;  // [num_tiles]
  int num_tiles = 0, tile_tokens = 1;
};

// One block over the P = T k pairs of ids.
__global__ void __launch_bounds__(kGroupThreads) group_kernel(const int32_t* __restrict__ ids, int P, int E, Groups g) {
  extern __shared__ int start[];  // E: each expert's first place, then its next free one
  int* count = start + E;         // E
  __shared__ int chosen_total, tiles_total;
  wait_for_previous();
  allow_next();
  const int tid = threadIdx.x, lane = tid % 32, tt = g.tile_tokens;
  for (int e = tid; e < E; e += blockDim.x) count[e] = 0;
  for (int p = tid; p < P; p += blockDim.x) g.pair_at[p] = -1;
  __syncthreads();
  for (int p = tid; p < P; p += blockDim.x)
    if (ids[p] >= 0 && ids[p] < E) atomicAdd(&count[ids[p]], 1);
  __syncthreads();
  if (tid < 32) {  // a scan over 32 contiguous ranges of experts
    const int per = (E + 31) / 32, lo = min(E, lane * per), hi = min(E, lo + per);
    int pairs = 0, chosen = 0, tiles = 0;
    for (int e = lo; e < hi; ++e) pairs += count[e], chosen += count[e] > 0, tiles += (count[e] + tt - 1) / tt;
    int pairs_before = pairs, chosen_before = chosen, tiles_before = tiles;  // inclusive, then exclusive
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int a = __shfl_up_sync(0xffffffffu, pairs_before, o), b = __shfl_up_sync(0xffffffffu, chosen_before, o),
                c = __shfl_up_sync(0xffffffffu, tiles_before, o);
      if (lane >= o) pairs_before += a, chosen_before += b, tiles_before += c;
    }
    if (lane == 31) chosen_total = chosen_before, tiles_total = tiles_before;
    pairs_before -= pairs, chosen_before -= chosen, tiles_before -= tiles;
    for (int e = lo; e < hi; ++e) {
      start[e] = pairs_before;
      if (count[e] > 0) g.slots[chosen_before++] = make_int4(e, pairs_before, pairs_before + count[e], 0);
      if (g.tiles)
        for (int b = pairs_before; b < pairs_before + count[e]; b += tt)
          g.tiles[tiles_before++] = make_int4(e, b, min(b + tt, pairs_before + count[e]), 0);
      pairs_before += count[e];
    }
  }
  __syncthreads();
  for (int s = chosen_total + tid; s < g.num_slots; s += blockDim.x) g.slots[s] = make_int4(-1, 0, 0, 0);
  for (int s = tiles_total + tid; s < g.num_tiles; s += blockDim.x) g.tiles[s] = make_int4(-1, 0, 0, 0);
  for (int p = tid; p < P; p += blockDim.x) {
    const int e = ids[p];
    const int at = e >= 0 && e < E ? atomicAdd(&start[e], 1) : -1;
    g.place[p] = at;
    if (at >= 0) g.pair_at[at] = p;
  }
}

// sums[r][i] = w[r] · x[i] over K (16-byte aligned rows), for the first m of kPairs inputs; every
// lane gets the sums.
template <class W, int kRows, int kPairs>
__device__ __forceinline__ void rows_times(const W* const (&w)[kRows], const float* const (&x)[kPairs], int m, int64_t K,
                                           float (&sums)[kRows][kPairs]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int i = 0; i < kPairs; ++i) sums[r][i] = 0.0f;
#pragma unroll 2
  for (int64_t c = lane * 8; c < K; c += 256) {
    float wf[kRows][8];
#pragma unroll
    for (int r = 0; r < kRows; ++r) load8(w[r] + c, wf[r]);
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      if (i >= m) break;
      const float4 a = *reinterpret_cast<const float4*>(x[i] + c), b = *reinterpret_cast<const float4*>(x[i] + c + 4);
#pragma unroll
      for (int r = 0; r < kRows; ++r) sums[r][i] += dot8(wf[r], a, b);
    }
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i)
    if (i < m)
#pragma unroll
      for (int r = 0; r < kRows; ++r) sums[r][i] = warp_sum(sums[r][i]);
}

// Block (s, b): the expert e of slot s, its rows (b kWarps + warp) kR .. + kR (a warp each)
// of a product with K columns and N rows (N a multiple of kR), for each of its pairs, kPairs a
// pass (one for a single token). Registers capped so that an SM holds six blocks of the one-pair
// form (a Qwen3-30B-A3B-shaped token's gate/up, 8 experts x 96 blocks, in one wave) and four of
// the eight-pair form (uncapped it took 85 registers, two blocks an SM: batch 32 ran 4,846 tok/s
// against 5,945 at 75 registers and three). kGlu: w is
// [E, 2N, K], gate's N rows then up's, input h's rows (token = pair / k), out[place, n] =
// act(gate · h) * (up · h); else w is [E, N, K], input in's rows (by place), out[place, n] = w · in.
template <class W, bool kGlu, bool kGelu, int kR, int kPairs>
__global__ void __launch_bounds__(kWarps * 32, kPairs == 1 ? 6 : 4)
    expert_rows_kernel(const float* __restrict__ in, const W* __restrict__ w, int64_t N, int64_t K, int k,
                       const int4* __restrict__ slots, const int32_t* __restrict__ pair_at, float* __restrict__ out) {
  wait_for_previous();
  allow_next();
  const int4 slot = slots[blockIdx.x];
  const int64_t n0 = (int64_t(blockIdx.y) * kWarps + threadIdx.x / 32) * kR;
  if (slot.x < 0 || n0 >= N) return;
  constexpr int kRows = kGlu ? 2 * kR : kR;
  const W* rows[kRows];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    rows[r] = w + (int64_t(slot.x) * (kGlu ? 2 : 1) * N + n0 + r) * K;
    if constexpr (kGlu) rows[kR + r] = rows[r] + N * K;
  }
  for (int c = slot.y; c < slot.z; c += kPairs) {
    const int m = min(kPairs, slot.z - c);
    const float* x[kPairs];
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int at = c + min(i, m - 1);
      x[i] = in + (kGlu ? int64_t(pair_at[at] / k) : int64_t(at)) * K;
    }
    float sums[kRows][kPairs];
    rows_times<W, kRows, kPairs>(rows, x, m, K, sums);
    if (threadIdx.x % 32 == 0)
#pragma unroll
      for (int i = 0; i < kPairs; ++i)
        if (i < m)
#pragma unroll
          for (int r = 0; r < kR; ++r)
            out[int64_t(c + i) * N + n0 + r] = kGlu ? glu_times<kGelu>(sums[r][i], sums[kR + r][i]) : sums[r][i];
  }
}

// Block (b, t): x[t, c] += sum over j of weights[t, j] * y[place[t k + j], c], a thread a column c.
__global__ void combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ place,
                               const float* __restrict__ weights, int k, int64_t H, float* __restrict__ x) {
  wait_for_previous();
  allow_next();
  const int64_t t = blockIdx.y, c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= H) return;
  float s = 0.0f;
#pragma unroll 8
  for (int j = 0; j < k; ++j) {
    const int p = place[t * k + j];
    if (p >= 0) s += weights[t * k + j] * y[int64_t(p) * H + c];
  }
  x[t * H + c] += s;
}

// Rows a warp of the down product takes (I and H are multiples of 8): a Qwen3-30B-A3B-shaped
// expert's rows are 1.5 KB, and two a warp keep more bytes in flight for each warp's start.
constexpr int kDownRows = 2;

// The GEMV-form products, after the grouping.
template <class W, int kPairs>
void launch_rows(Glu act, const ExpertsArgs& a, const Groups& g, cudaStream_t s) {
  const int num_slots = g.num_slots;
  const W* gate_up = static_cast<const W*>(a.gate_up);
  const dim3 block(kWarps * 32), mid_grid(unsigned(num_slots), unsigned((a.I + kWarps - 1) / kWarps));
  const dim3 out_grid(unsigned(num_slots), unsigned((a.H / kDownRows + kWarps - 1) / kWarps));
  const int4* slots = g.slots;
  float* mid = static_cast<float*>(a.mid);
  if (act == Glu::GeGLU)
    launch_dependent(expert_rows_kernel<W, true, true, 1, kPairs>, mid_grid, block, 0, s, a.h, gate_up, a.I, a.H,
                     int(a.k), slots, g.pair_at, mid);
  else
    launch_dependent(expert_rows_kernel<W, true, false, 1, kPairs>, mid_grid, block, 0, s, a.h, gate_up, a.I, a.H,
                     int(a.k), slots, g.pair_at, mid);
  launch_dependent(expert_rows_kernel<W, false, false, kDownRows, kPairs>, out_grid, block, 0, s, mid,
                   static_cast<const W*>(a.down), a.H, a.I, int(a.k), slots, g.pair_at, a.out);
}

template <class W>
void launch_experts(Glu act, DType dt, const ExpertsArgs& a, cudaStream_t s) {
  const int64_t P = a.T * a.k;
  Groups g{reinterpret_cast<int4*>(a.slots), a.place, a.pair_at, int(std::min<int64_t>(a.E, P))};
  if (a.tiles) {
    g.tiles = reinterpret_cast<int4*>(a.tiles);
    g.num_tiles = int(expert_tiles_max(P, a.E));
    g.tile_tokens = kExpertTileTokens;
  }
  launch_dependent(group_kernel, dim3(1), dim3(kGroupThreads), size_t(2 * a.E) * sizeof(int), s, a.ids, int(P),
                   int(a.E), g);
  if (a.tiles) expert_tiles(act, dt, a, s);
  else if (a.T == 1) launch_rows<W, 1>(act, a, g, s);
  else launch_rows<W, 8>(act, a, g, s);
  const int threads = 256;
  launch_dependent(combine_kernel, dim3(unsigned((a.H + threads - 1) / threads), unsigned(a.T)), dim3(threads), 0, s,
                   a.out, g.place, a.weights, int(a.k), a.H, a.x);
}

}  // namespace

void moe_route(const float* logits, int64_t T, int64_t E, int k, bool renormalize, int32_t* ids, float* weights,
               cudaStream_t s) {
  if (T == 0) return;
  const size_t smem = size_t(kRouteWarps) * size_t(E) * (sizeof(float) + 1);
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(route_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
          "moe route shared memory");
  launch_dependent(route_kernel, dim3(unsigned((T + kRouteWarps - 1) / kRouteWarps)), dim3(kRouteWarps * 32), smem, s,
                   logits, T, int(E), k, renormalize, ids, weights);
  check_launch("moe_route");
}

void moe_experts(Glu act, DType dt, const ExpertsArgs& a, cudaStream_t s) {
  if (a.T == 0) return;
  if (dt == DType::BF16) launch_experts<__nv_bfloat16>(act, dt, a, s);
  else if (dt == DType::F16) launch_experts<__half>(act, dt, a, s);
  else launch_experts<float>(act, dt, a, s);
  check_launch("moe_experts");
}

}  // namespace tessera::cuda

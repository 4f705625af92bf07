// Sampling where the logits are (Backend::sample_rows): the host sampler's draw with the host's
// uniform, so only the ids come back. Rows whose top-k or top-p cut needs the sampler's order
// (larger value first, then lower id) get it from one radix sort of every row's (row, value
// rank) keys with the ids as payload; the rest draw in id order, as the host does. Then one block
// per row: the candidates' exp(v - max) in double, their sum, the top-p prefix and the inverse
// CDF by a block-wide scan of per-thread segment sums, min-p as a mask. The sums are
// tree-ordered where the host adds one by one, so a draw can differ only where u lands within
// rounding (~1e-16) of a boundary.
#include <cub/cub.cuh>

#include <climits>

#include "backend/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 512;

// The sampler's candidate order as an ascending 32-bit rank: larger values first; -0 and +0 equal.
__device__ __forceinline__ uint32_t rank_of(float v) {
  uint32_t b = __float_as_uint(v + 0.0f);
  uint32_t ascending = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ~ascending;
}
__device__ __forceinline__ float value_of(uint32_t rank) {
  uint32_t ascending = ~rank;
  return __uint_as_float((ascending & 0x80000000u) ? (ascending & 0x7fffffffu) : ~ascending);
}

// One thread per edit (at most one per logit). The intrinsics round each step on its own, as the
// host does: nothing is contracted into a fused multiply-add.
__global__ void edit_logits_kernel(float* x, int64_t V, const LogitEdit* edits, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const LogitEdit e = edits[i];
  float* at = x + int64_t(e.row) * V + e.token;
  float v = *at;
  if (e.ops & LogitEdit::kRepetition) v = v > 0.0f ? __fdiv_rn(v, e.repetition) : __fmul_rn(v, e.repetition);
  if (e.ops & LogitEdit::kSubtract) v = __fsub_rn(v, e.subtract);
  if (e.ops & LogitEdit::kAdd) v = __fadd_rn(v, e.add);
  *at = v;
}

__host__ __device__ bool needs_order(const SampleParams& p, int64_t V) {
  return p.temperature > 0.0f && ((p.top_k > 0 && p.top_k < V) || p.top_p < 1.0f);
}

__global__ void keys_kernel(const float* x, const SampleParams* params, int64_t R, int64_t V, uint64_t* keys,
                            int32_t* ids) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < R * V; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / V;
    const float t = params[r].temperature;
    keys[e] = uint64_t(r) << 32 | rank_of(t > 0.0f ? x[e] / t : x[e]);
    ids[e] = int32_t(e % V);
  }
}

struct Smaller {
  __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};

struct MaxAt {
  float v;
  int i;
};
// The larger value; the lower index on ties (the first maximum).
struct FirstMax {
  __device__ MaxAt operator()(const MaxAt& a, const MaxAt& b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
  }
};

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* x, const SampleParams* params, int64_t V,
                                                           const uint64_t* sorted_keys, const int32_t* sorted_ids,
                                                           int32_t* out) {
  using Scan = cub::BlockScan<double, kThreads>;
  using SumD = cub::BlockReduce<double, kThreads>;
  using MinI = cub::BlockReduce<int, kThreads>;
  using Max = cub::BlockReduce<MaxAt, kThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename SumD::TempStorage sum;
    typename MinI::TempStorage min;
    typename Max::TempStorage max;
  } tmp;
  __shared__ double shared_d;
  __shared__ int shared_i;
  __shared__ float shared_f;

  const int64_t r = blockIdx.x;
  const SampleParams p = params[r];
  const float* xr = x + r * V;
  const int tid = threadIdx.x;

  // The row's first maximum: the greedy token, and the softmax's shift.
  const float t = p.temperature > 0.0f ? p.temperature : 1.0f;
  MaxAt best{-INFINITY, -1};
  for (int64_t j = tid; j < V; j += kThreads) {
    float v = p.temperature > 0.0f ? xr[j] / t : xr[j];
    if (best.i < 0 || v > best.v) best = {v, int(j)};
  }
  best = Max(tmp.max).Reduce(best, FirstMax());
  if (tid == 0) shared_i = best.i, shared_f = best.v;
  __syncthreads();
  if (p.temperature <= 0.0f) {
    if (tid == 0) out[r] = shared_i;
    return;
  }
  const float mx = shared_f;
  const bool ordered = needs_order(p, V);
  const int64_t n = (p.top_k > 0 && p.top_k < V) ? p.top_k : V;
  auto value = [&](int64_t j) { return ordered ? value_of(uint32_t(sorted_keys[r * V + j])) : xr[j] / t; };
  auto id = [&](int64_t j) { return ordered ? sorted_ids[r * V + j] : int32_t(j); };

  // Sum of the candidates' exp(v - max).
  double part = 0;
  for (int64_t j = tid; j < n; j += kThreads) part += exp(double(value(j)) - double(mx));
  double total = SumD(tmp.sum).Sum(part);
  if (tid == 0) shared_d = total;
  __syncthreads();
  const double sum = shared_d;
  auto prob = [&](int64_t j) { return exp(double(value(j)) - double(mx)) / sum; };

  // The first index in [0, limit) where the inclusive running sum of weight(j) (>= 0) reaches
  // (reach is monotone: once true, true for every larger sum); -1 if none. Each thread sums a
  // contiguous segment, a block-wide scan gives each segment's start, and the thread whose segment
  // first reaches walks it (rather than one block-wide scan per 512 candidates, in order).
  auto first_where = [&](int64_t limit, auto weight, auto reach) -> int64_t {
    const int64_t seg = (limit + kThreads - 1) / kThreads;
    const int64_t b = min(limit, tid * seg), e = min(limit, b + seg);
    double own = 0, before;
    for (int64_t j = b; j < e; ++j) own += weight(j);
    Scan(tmp.scan).ExclusiveSum(own, before);
    __syncthreads();
    const bool found = e > b && reach(before + own);
    const int first = MinI(tmp.min).Reduce(found ? tid : INT_MAX, Smaller());
    if (tid == 0) shared_i = first;
    __syncthreads();
    const int owner = shared_i;
    __syncthreads();
    if (owner == INT_MAX) return -1;
    if (tid == owner) {
      // The segment's first index that reaches; its last positive one if rounding (the scan adds
      // in another order than this walk) leaves the walk just short.
      int64_t at = -1, last_positive = b;
      double cum = before;
      for (int64_t j = b; j < e && at < 0; ++j) {
        const double w = weight(j);
        cum += w;
        if (w > 0.0) last_positive = j;
        if (w > 0.0 && reach(cum)) at = j;
      }
      shared_i = int(at >= 0 ? at : last_positive);
    }
    __syncthreads();
    const int64_t at = shared_i;
    __syncthreads();
    return at;
  };

  // Top-p: the smallest prefix whose mass reaches top_p (all candidates if none does).
  int64_t keep = n;
  if (p.top_p < 1.0f) {
    int64_t at = first_where(n, prob, [&](double cum) { return cum >= double(p.top_p); });
    if (at >= 0) keep = at + 1;
  }
  // Min-p against the most likely token (exp(0) / sum), as a mask over the kept prefix.
  const double floor = p.min_p > 0.0f ? double(p.min_p) * (1.0 / sum) : -1.0;
  auto kept = [&](int64_t j) {
    double q = prob(j);
    return q >= floor ? q : 0.0;
  };
  part = 0;
  for (int64_t j = tid; j < keep; j += kThreads) part += kept(j);
  total = SumD(tmp.sum).Sum(part);
  if (tid == 0) shared_d = total;
  __syncthreads();
  const double target = p.u * shared_d;
  // The first kept token whose cumulative probability exceeds u * mass; else the last kept one.
  int64_t pick = first_where(keep, kept, [&](double cum) { return cum > target; });
  if (pick < 0) {
    int last = -1;
    for (int64_t j = tid; j < keep; j += kThreads)
      if (kept(j) > 0.0) last = int(j);
    last = MinI(tmp.min).Reduce(last >= 0 ? -last : INT_MAX, Smaller());
    pick = last == INT_MAX ? 0 : -int64_t(last);
  }
  if (tid == 0) out[r] = id(pick);
}

// The sort's key bits: 32 of value rank, then enough for the row index.
int key_bits(int64_t R) {
  int b = 32;
  while ((int64_t(1) << (b - 32)) < R) ++b;
  return b;
}

}  // namespace

size_t sample_rows_workspace(const SampleParams* host_params, int64_t R, int64_t V) {
  bool order = false;
  for (int64_t r = 0; r < R; ++r) order = order || needs_order(host_params[r], V);
  if (!order) return 0;
  size_t sort_bytes = 0;
  TESSERA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                                                     static_cast<uint64_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                     static_cast<int32_t*>(nullptr), R * V, 0, key_bits(R)));
  const size_t n = size_t(R * V);
  return n * (2 * sizeof(uint64_t) + 2 * sizeof(int32_t)) + sort_bytes + 256;
}

void sample_rows(const float* x, const SampleParams* params, int64_t R, int64_t V, void* workspace,
                 size_t workspace_bytes, int32_t* out, cudaStream_t s) {
  if (R == 0) return;
  const uint64_t* sorted_keys = nullptr;
  const int32_t* sorted_ids = nullptr;
  if (workspace_bytes > 0) {
    const size_t n = size_t(R * V);
    char* w = static_cast<char*>(workspace);
    auto* keys = reinterpret_cast<uint64_t*>(w);
    auto* keys_out = keys + n;
    auto* ids = reinterpret_cast<int32_t*>(keys_out + n);
    auto* ids_out = ids + n;
    char* sort_tmp = reinterpret_cast<char*>(ids_out + n);
    size_t sort_bytes = workspace_bytes - n * (2 * sizeof(uint64_t) + 2 * sizeof(int32_t));
    keys_kernel<<<int(std::min<int64_t>((R * V + 255) / 256, 65536)), 256, 0, s>>>(x, params, R, V, keys, ids);
    check_launch("sample_rows keys");
    TESSERA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, keys, keys_out, ids, ids_out, R * V, 0,
                                                       key_bits(R), s));
    sorted_keys = keys_out, sorted_ids = ids_out;
  }
  sample_kernel<<<unsigned(R), kThreads, 0, s>>>(x, params, V, sorted_keys, sorted_ids, out);
  check_launch("sample_rows");
}

void edit_logits(float* x, int64_t V, const LogitEdit* edits, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  edit_logits_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, V, edits, n);
  check_launch("edit_logits");
}

}  // namespace tessera::cuda

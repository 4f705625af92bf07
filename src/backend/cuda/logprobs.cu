// Backend::logprobs on the GPU: one block per listed row. The row's maximum as the host takes it
// (a NaN is passed over unless it comes first), the normaliser's sum of exp(x - max) in double,
// the token's value, then the top_n list one entry per pass: each pass takes the first of the
// values that come after the previous entry in the order (larger value, then lower id), so ties
// are settled exactly as a sort would. The sum's order is a tree's where the host adds in id
// order: values may differ in the last place where the two normalisers round apart.
#include <cub/cub.cuh>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 512;

struct Entry {
  float lp;
  int id;  // -1: none
};
// Whether a comes before b in the list's order.
__device__ __forceinline__ bool before(const Entry& a, const Entry& b) {
  return b.id < 0 || (a.id >= 0 && (a.lp > b.lp || (a.lp == b.lp && a.id < b.id)));
}
struct First {
  __device__ Entry operator()(const Entry& a, const Entry& b) const { return before(a, b) ? a : b; }
};
struct Larger {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

__global__ void __launch_bounds__(kThreads) logprobs_kernel(const float* x, int64_t R, int64_t V, const int32_t* rows,
                                                             const int32_t* tokens, int top_n, float* out_lp,
                                                             int32_t* out_ids) {
  using MaxF = cub::BlockReduce<float, kThreads>;
  using SumD = cub::BlockReduce<double, kThreads>;
  using Pick = cub::BlockReduce<Entry, kThreads>;
  __shared__ union {
    typename MaxF::TempStorage max;
    typename SumD::TempStorage sum;
    typename Pick::TempStorage pick;
  } tmp;
  __shared__ float shared_max;
  __shared__ double shared_lse;
  __shared__ Entry shared_entry;

  const int tid = threadIdx.x;
  const int64_t i = blockIdx.x;
  float* out = out_lp + i * (1 + top_n);
  const int32_t r = rows[i];
  if (r < 0 || r >= R) {  // the engine checks rows; a bad one gives NaN rather than a read out of bounds
    for (int k = tid; k <= top_n; k += kThreads) out[k] = NAN;
    for (int k = tid; k < top_n; k += kThreads) out_ids[i * top_n + k] = -1;
    return;
  }
  const float* row = x + r * V;

  float mx = row[0];
  for (int64_t j = tid; j < V; j += kThreads) mx = row[j] > mx ? row[j] : mx;
  mx = MaxF(tmp.max).Reduce(mx, Larger());
  if (tid == 0) shared_max = mx;
  __syncthreads();
  mx = shared_max;
  double sum = 0;
  for (int64_t j = tid; j < V; j += kThreads) sum += exp(double(row[j]) - double(mx));
  sum = SumD(tmp.sum).Sum(sum);
  if (tid == 0) shared_lse = double(mx) + log(sum);
  __syncthreads();
  const double lse = shared_lse;
  auto lp_of = [&](int64_t j) { return float(double(row[j]) - lse); };
  if (tid == 0) {
    const int32_t token = tokens[r];
    out[0] = token >= 0 && token < V ? lp_of(token) : NAN;
  }
  if (!isfinite(lse)) {  // no order among NaNs: the first ids
    for (int k = tid; k < top_n; k += kThreads) out[1 + k] = lp_of(k), out_ids[i * top_n + k] = k;
    return;
  }
  Entry prev{INFINITY, -1};  // every value comes after it
  for (int k = 0; k < top_n; ++k) {
    Entry best{0.0f, -1};
    for (int64_t j = tid; j < V; j += kThreads) {
      const Entry e{lp_of(j), int(j)};
      if ((prev.id < 0 || before(prev, e)) && before(e, best)) best = e;
    }
    best = Pick(tmp.pick).Reduce(best, First());
    if (tid == 0) {
      shared_entry = best;
      out[1 + k] = best.lp;
      out_ids[i * top_n + k] = best.id;
    }
    __syncthreads();
    prev = shared_entry;
  }
}

}  // namespace

void logprobs(const float* x, int64_t R, int64_t V, const int32_t* rows, int64_t n, const int32_t* tokens, int top_n,
              float* out_lp, int32_t* out_ids, cudaStream_t s) {
  if (n == 0) return;
  logprobs_kernel<<<unsigned(n), kThreads, 0, s>>>(x, R, V, rows, tokens, top_n, out_lp, out_ids);
  check_launch("logprobs");
}

}  // namespace tessera::cuda

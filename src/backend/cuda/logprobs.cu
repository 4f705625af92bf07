// Backend::logprobs on the GPU. Each listed row goes in chunks of kChunk values, a block each, so
// that one row (one client among many asking for logprobs) spreads over the GPU instead of
// holding up the step on one SM (one block a row took ~0.4 ms on a 128k vocabulary). Three passes:
//  1. each chunk's maximum and its sum of exp(x - that maximum), in double;
//  2. each chunk's first top_n values in the list's order (larger value, then lower id), the
//     values taken with the row's normaliser;
//  3. a block a row: the token's value, and the list merged from its chunks' lists.
// As on the host, a NaN or +inf anywhere, or a row of -inf, makes it NaN; then the list is the
// first ids. Its sum is a tree's where the host adds in id order: values may differ in the last
// place where the two normalisers round apart.
#include <cub/cub.cuh>

#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256, kPerThread = 16, kChunk = kThreads * kPerThread;

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
struct Larger {  // NaN passed over
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

using Pick = cub::BlockReduce<Entry, kThreads>;
struct PickShared {
  typename Pick::TempStorage tmp;
  Entry entry;
};

// The first top_n entries, in the list's order, of the candidates the block's threads hold: each
// round a block-wide pick of the first entry after the previous round's. each(f) calls f on each
// of this thread's candidates; thread 0 gets emit(k, entry k) (id -1 once they run out).
template <class Each, class Emit>
__device__ void list_first(int top_n, Each each, Emit emit, PickShared& shared) {
  Entry prev{INFINITY, -1};  // every entry comes after it
  for (int k = 0; k < top_n; ++k) {
    Entry best{0.0f, -1};
    each([&](const Entry& e) {
      if ((prev.id < 0 || before(prev, e)) && before(e, best)) best = e;
    });
    best = Pick(shared.tmp).Reduce(best, First());
    if (threadIdx.x == 0) shared.entry = best, emit(k, best);
    __syncthreads();
    prev = shared.entry;
  }
}

struct Partial {
  float max;   // of the chunk's values other than NaN; -inf if none
  double sum;  // of exp(x - max), -inf values counting 0 (NaN where x is NaN or max is +inf)
};

// The row's normaliser from its chunks' partials, max + log(sum), each chunk's sum rescaled to the
// row's max: the first warp's work, a chunk a lane, added across the warp in a fixed order (a
// butterfly, whose every lane ends with the same sum), so passes 2 and 3 take the same value.
// Written to *lse for the block.
__device__ void normaliser(const Partial* p, int chunks, double* lse) {
  const int lane = threadIdx.x;
  if (lane < 32) {
    float mx = -INFINITY;
    for (int c = lane; c < chunks; c += 32) mx = fmaxf(mx, p[c].max);
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
    double sum = 0;
    for (int c = lane; c < chunks; c += 32) sum += p[c].sum * exp(double(p[c].max) - double(mx));
    sum = warp_sum(sum);
    if (lane == 0) *lse = double(mx) + log(sum);
  }
  __syncthreads();
}

__device__ __forceinline__ bool row_ok(int32_t r, int64_t R) { return r >= 0 && r < R; }

// Grid (n, chunks): block (i, c) writes the partial of chunk c of row rows[i].
__global__ void __launch_bounds__(kThreads) partials_kernel(const float* x, int64_t R, int64_t V, const int32_t* rows,
                                                            Partial* partials) {
  using MaxF = cub::BlockReduce<float, kThreads>;
  using SumD = cub::BlockReduce<double, kThreads>;
  __shared__ union {
    typename MaxF::TempStorage max;
    typename SumD::TempStorage sum;
  } tmp;
  __shared__ float shared_max;
  const int c = blockIdx.y, tid = threadIdx.x;
  const int32_t r = rows[blockIdx.x];
  if (!row_ok(r, R)) return;
  const float* row = x + r * V;
  const int64_t begin = int64_t(c) * kChunk, end = min(V, begin + kChunk);
  float v[kPerThread];
  float mx = -INFINITY;
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) {
    const int64_t j = begin + tid + e * kThreads;
    v[e] = j < end ? row[j] : -INFINITY;
    mx = fmaxf(mx, v[e]);
  }
  mx = MaxF(tmp.max).Reduce(mx, Larger());
  if (tid == 0) shared_max = mx;
  __syncthreads();
  mx = shared_max;
  double sum = 0;
#pragma unroll
  for (int e = 0; e < kPerThread; ++e)
    if (v[e] != -INFINITY) sum += exp(double(v[e]) - double(mx));
  sum = SumD(tmp.sum).Sum(sum);
  if (tid == 0) partials[int64_t(blockIdx.x) * gridDim.y + c] = {mx, sum};
}

// Grid (n, chunks): block (i, c) writes chunk c's first top_n entries of row rows[i] (id -1 past
// the chunk's values) to candidates + (i chunks + c) top_n.
__global__ void __launch_bounds__(kThreads) candidates_kernel(const float* x, int64_t R, int64_t V,
                                                              const int32_t* rows, const Partial* partials,
                                                              int top_n, Entry* candidates) {
  __shared__ PickShared pick;
  __shared__ double shared_lse;
  const int c = blockIdx.y, chunks = gridDim.y, tid = threadIdx.x;
  const int32_t r = rows[blockIdx.x];
  if (!row_ok(r, R)) return;
  normaliser(partials + int64_t(blockIdx.x) * chunks, chunks, &shared_lse);
  const double lse = shared_lse;
  if (!isfinite(lse)) return;  // pass 3 lists the first ids
  const float* row = x + r * V;
  const int64_t begin = int64_t(c) * kChunk, end = min(V, begin + kChunk);
  Entry mine[kPerThread];
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) {
    const int64_t j = begin + tid + e * kThreads;
    mine[e] = j < end ? Entry{float(double(row[j]) - lse), int(j)} : Entry{0.0f, -1};
  }
  Entry* out = candidates + (int64_t(blockIdx.x) * chunks + c) * top_n;
  list_first(
      top_n,
      [&](auto f) {
#pragma unroll
        for (int e = 0; e < kPerThread; ++e) f(mine[e]);
      },
      [&](int k, const Entry& e) { out[k] = e; }, pick);
}

// Grid n: block i writes row rows[i]'s token value and its list.
__global__ void __launch_bounds__(kThreads) merge_kernel(const float* x, int64_t R, int64_t V, const int32_t* rows,
                                                         const int32_t* tokens, const Partial* partials, int chunks,
                                                         const Entry* candidates, int top_n, float* out_lp,
                                                         int32_t* out_ids) {
  __shared__ PickShared pick;
  __shared__ double shared_lse;
  const int tid = threadIdx.x;
  const int64_t i = blockIdx.x;
  float* out = out_lp + i * (1 + top_n);
  const int32_t r = rows[i];
  if (!row_ok(r, R)) {  // the engine checks rows; a bad one gives NaN rather than a read out of bounds
    for (int k = tid; k <= top_n; k += kThreads) out[k] = NAN;
    for (int k = tid; k < top_n; k += kThreads) out_ids[i * top_n + k] = -1;
    return;
  }
  const float* row = x + r * V;
  normaliser(partials + i * chunks, chunks, &shared_lse);
  const double lse = shared_lse;
  if (tid == 0) {
    const int32_t token = tokens[r];
    out[0] = token >= 0 && token < V ? float(double(row[token]) - lse) : NAN;
  }
  if (!isfinite(lse)) {  // no order among NaNs: the first ids
    for (int k = tid; k < top_n; k += kThreads) out[1 + k] = float(double(row[k]) - lse), out_ids[i * top_n + k] = k;
    return;
  }
  const Entry* list = candidates + i * chunks * top_n;
  const int n = chunks * top_n;
  list_first(
      top_n,
      [&](auto f) {
        for (int j = tid; j < n; j += kThreads) f(list[j]);
      },
      [&](int k, const Entry& e) { out[1 + k] = e.lp, out_ids[i * top_n + k] = e.id; }, pick);
}

int chunks_of(int64_t V) { return int((V + kChunk - 1) / kChunk); }

}  // namespace

size_t logprobs_workspace(int64_t V, int64_t n, int top_n) {
  const size_t chunks = size_t(chunks_of(V)), rows = size_t(n);
  return rows * chunks * sizeof(Partial) + rows * chunks * size_t(top_n) * sizeof(Entry);
}

void logprobs(const float* x, int64_t R, int64_t V, const int32_t* rows, int64_t n, const int32_t* tokens, int top_n,
              float* out_lp, int32_t* out_ids, void* workspace, cudaStream_t s) {
  if (n == 0) return;
  const int chunks = chunks_of(V);
  auto* partials = static_cast<Partial*>(workspace);
  auto* candidates = reinterpret_cast<Entry*>(partials + n * chunks);
  const dim3 grid{unsigned(n), unsigned(chunks)};
  partials_kernel<<<grid, kThreads, 0, s>>>(x, R, V, rows, partials);
  if (top_n > 0) candidates_kernel<<<grid, kThreads, 0, s>>>(x, R, V, rows, partials, top_n, candidates);
  merge_kernel<<<unsigned(n), kThreads, 0, s>>>(x, R, V, rows, tokens, partials, chunks, candidates, top_n, out_lp,
                                                out_ids);
  check_launch("logprobs");
}

}  // namespace tessera::cuda

// Sampling where the logits are (Backend::sample_rows): the host sampler's draw with the host's
// uniform, so only the ids come back. Each row is cut into slices, one block each, for the
// passes over the whole vocabulary: the row's first maximum (the greedy token and the softmax's
// shift), the sum of exp(v - max) in double, and, for a row whose top-k or top-p cut needs the
// sampler's order (larger value first, then lower id), a histogram of the values in equal steps
// below the maximum (count and mass per bin; a bin's values all come before the next bin's).
// From it one block per row finds the bins that matter:
// - a top-p row whose bins are small is drawn from the bins' masses: only the bin where the cut
//   falls and the few where u may land have their candidates' keys written, and the cut's bin
//   and u's are sorted, in shared memory;
// - otherwise the fewest leading bins that hold the top-k, or the top-p mass with a margin far
//   above rounding, are the candidates, sorted as (value rank, id) keys in runs of whole bins (a
//   flat row's many candidates in many segments at once).
// A row without such a cut draws in id order, as the host does: each slice's kept mass, then a
// walk of the slice where u lands. The last step, one block per row, is the host's: top-p
// prefix, min-p mask, inverse CDF, its prefix sums from a block scan of per-thread segment sums.
// The sums are tree-ordered (the histogram's in no fixed order) where the host adds one by one,
// so a draw can differ only where u lands within rounding (~1e-16) of a boundary.
#include <cub/cub.cuh>

#include <algorithm>
#include <climits>

#include "backend/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 512;       // the last step's block (one per row)
constexpr int kSliceThreads = 256;  // a slice's block
constexpr int kMaxSlices = 64;
// Histogram bins: equal steps of v (logit / temperature) below the row's maximum, down to its
// smallest finite value but at most kMaxSpan (further weights are below e^-kMaxSpan), the last
// bin open-ended. The threshold kernel gives each bin one thread.
constexpr int kBins = 512;
constexpr float kMaxSpan = 64.0f;
// The top-p mass the chosen bins must exceed, relative: the histogram adds in another order than
// the last step (~1e-13 apart at most), so its bins cover the cut with room to spare.
constexpr double kMassMargin = 1e-9;
// A top-p row (no top-k, no min-p) whose bins up to the cut's each hold at most kWalkBin values
// is drawn from its bins' masses, sorting only the bin of the cut and the bin u lands in (in
// shared memory); other rows sort all their candidates.
constexpr int kWalkItems = 4;
constexpr int kWalkBin = 512 * kWalkItems;
// Sort segments a cub::DeviceSegmentedSort call takes: up to its partitioning threshold (300 on
// every tuning policy) it sorts each segment in one block of one kernel, an empty one at once.
// Past it, it would read the segments' sizes back to the host mid-call.
constexpr int kSortSegments = 256;

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

__host__ __device__ bool top_k_cuts(const SampleParams& p, int64_t V) { return p.top_k > 0 && p.top_k < V; }
__host__ __device__ bool needs_order(const SampleParams& p, int64_t V) {
  return p.temperature > 0.0f && (top_k_cuts(p, V) || p.top_p < 1.0f);
}
__device__ bool may_walk(const SampleParams& p, int64_t V) {
  return p.temperature > 0.0f && p.top_p < 1.0f && !top_k_cuts(p, V) && p.min_p <= 0.0f;
}

// The value the draw weighs: logit / temperature (the logit itself for greedy rows).
__device__ __forceinline__ float scaled(float x, float temperature) {
  return temperature > 0.0f ? x / temperature : x;
}
struct MaxAt {
  float v;
  int i;
  float lo;  // the smallest finite value
};
// The larger value; the lower index on ties (the first maximum). And the smaller low.
struct FirstMax {
  __device__ MaxAt operator()(const MaxAt& a, const MaxAt& b) const {
    const float lo = fminf(a.lo, b.lo);
    if (a.i < 0) return {b.v, b.i, lo};
    if (b.i < 0) return {a.v, a.i, lo};
    return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? MaxAt{b.v, b.i, lo} : MaxAt{a.v, a.i, lo};
  }
};

// A row's histogram: bins of 1 / scale below mx.
struct Bins {
  float mx, scale;
};
__device__ __forceinline__ Bins bins_of(const MaxAt& m) {
  const float span = fminf(fmaxf(m.v - m.lo, 1e-3f), kMaxSpan);
  return {m.v, float(kBins - 1) / span};
}
// v's bin; monotone in v (a larger value never lands in a later bin), so the leading bins hold a
// prefix of the sampler's order. -inf and NaN land in the last bin.
__device__ __forceinline__ int bin_of(const Bins& b, float v) {
  const float d = (b.mx - v) * b.scale;
  return d < float(kBins - 1) ? int(d) : kBins - 1;
}
struct Smaller {
  __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};

// What the passes leave for a row.
struct RowState {
  double sum;  // sum of exp(v - mx) over the row
  float mx;    // the first maximum of v, at `greedy`
  int greedy;
  Bins bins;
  int last_bin;  // the candidates' last bin; -1 where the row draws in id order
  int count;     // the candidates (bins up to last_bin), sorted at sorted[r * V, r * V + count)
  bool walk;     // drawn from the bins (the candidates left unsorted, bin by bin, at keys)
  // A walk's bins before the cut's that u may land in, [u_first, u_last] (empty when u_first >
  // u_last): only these and the cut's bin have their keys written.
  int u_first, u_last;
};

// Device workspace, carved from one allocation (carve()).
struct Work {
  MaxAt* slice_max;       // [R, slices]
  double* slice_sum;      // [R, slices]
  double* slice_kept;     // [R, slices]: kept mass of id-order rows
  RowState* state;        // [R]
  unsigned* bin_count;    // [R, kBins]
  double* bin_mass;       // [R, kBins]
  int* seg_begin;         // [R, groups]: the sort's segments, runs of whole bins, at keys[begin, end)
  int* seg_end;           // [R, groups]
  int* bin_fill;          // [R, kBins]: where the bin's next candidate goes
  uint64_t* keys;         // [R, V]: (rank << id_bits | id)
  uint64_t* sorted;       // [R, V]
  void* sort_tmp;
  size_t sort_bytes;
};

struct Slicing {
  int64_t V;
  int slices;
  int64_t len;  // elements per slice (the last may be shorter)
  int id_bits;
  int groups;   // sort segments per row (at most kBins)
};

// f(j, v) for this thread's logits of the slice [lo, hi) (j = lo + thread, then every
// kSliceThreads), in order, v = logit / t: 8 loads issued before the first is used, so that a
// thread's ~100 logits of a 64-row draw do not wait for memory one by one.
template <class F>
__device__ __forceinline__ void for_slice(const float* xr, int64_t lo, int64_t hi, float t, F f) {
  constexpr int kBatch = 8;
  int64_t j = lo + threadIdx.x;
  for (; j + (kBatch - 1) * kSliceThreads < hi; j += kBatch * kSliceThreads) {
    float v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) v[b] = xr[j + b * kSliceThreads];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) f(j + b * kSliceThreads, scaled(v[b], t));
  }
  for (; j < hi; j += kSliceThreads) f(j, scaled(xr[j], t));
}

__global__ void __launch_bounds__(kSliceThreads) slice_max_kernel(const float* x, const SampleParams* params,
                                                                  Slicing sl, MaxAt* slice_max) {
  using Max = cub::BlockReduce<MaxAt, kSliceThreads>;
  __shared__ typename Max::TempStorage tmp;
  const int64_t r = blockIdx.y;
  const float t = params[r].temperature;
  const float* xr = x + r * sl.V;
  const int64_t lo = blockIdx.x * sl.len, hi = min(sl.V, lo + sl.len);
  MaxAt best{-INFINITY, -1, INFINITY};
  for_slice(xr, lo, hi, t, [&](int64_t j, float v) {
    if (best.i < 0 || v > best.v) best.v = v, best.i = int(j);
    if (isfinite(v)) best.lo = fminf(best.lo, v);
  });
  best = Max(tmp).Reduce(best, FirstMax());
  if (threadIdx.x == 0) slice_max[r * sl.slices + blockIdx.x] = best;
}

// The row's maximum from its slices', for a whole warp (every lane gets it): a slice a lane, then
// a butterfly. FirstMax is associative and commutative (NaN aside), so any order gives the same.
__device__ MaxAt row_max(const MaxAt* slice_max, int64_t r, int slices) {
  MaxAt m{-INFINITY, -1, INFINITY};
  for (int b = threadIdx.x % 32; b < slices; b += 32) m = FirstMax()(m, slice_max[r * slices + b]);
  for (int o = 16; o > 0; o /= 2)
    m = FirstMax()(m, MaxAt{__shfl_xor_sync(~0u, m.v, o), __shfl_xor_sync(~0u, m.i, o), __shfl_xor_sync(~0u, m.lo, o)});
  return m;
}
// The row's sum of exp(v - mx) from its slices', for a whole warp: a slice a lane, then warp_sum.
__device__ double row_sum(const double* slice_sum, int64_t r, int slices) {
  double sum = 0;
  for (int b = threadIdx.x % 32; b < slices; b += 32) sum += slice_sum[r * slices + b];
  return warp_sum(sum);
}

// The slice's sum of exp(v - mx); for rows cut in order, its histogram added to the row's.
__global__ void __launch_bounds__(kSliceThreads) slice_sums_kernel(const float* x, const SampleParams* params,
                                                                   Slicing sl, Work w) {
  using SumD = cub::BlockReduce<double, kSliceThreads>;
  __shared__ typename SumD::TempStorage tmp;
  __shared__ unsigned count[kBins];
  __shared__ double mass[kBins];
  __shared__ Bins shared_bins;
  const int64_t r = blockIdx.y;
  const SampleParams p = params[r];
  if (p.temperature <= 0.0f) return;
  const bool ordered = needs_order(p, sl.V);
  if (threadIdx.x < 32) {
    const MaxAt m = row_max(w.slice_max, r, sl.slices);
    if (threadIdx.x == 0) shared_bins = bins_of(m);
  }
  if (ordered)
    for (int i = threadIdx.x; i < kBins; i += kSliceThreads) count[i] = 0, mass[i] = 0.0;
  __syncthreads();
  const Bins bins = shared_bins;
  const float mx = bins.mx;
  const float* xr = x + r * sl.V;
  const int64_t lo = blockIdx.x * sl.len, hi = min(sl.V, lo + sl.len);
  double part = 0;
  for_slice(xr, lo, hi, p.temperature, [&](int64_t, float v) {
    const double e = exp(double(v) - double(mx));
    part += e;
    if (ordered) {
      const int bin = bin_of(bins, v);
      atomicAdd(&count[bin], 1u);
      atomicAdd(&mass[bin], e);
    }
  });
  const double total = SumD(tmp).Sum(part);
  if (threadIdx.x == 0) w.slice_sum[r * sl.slices + blockIdx.x] = total;
  if (!ordered) return;
  __syncthreads();
  for (int i = threadIdx.x; i < kBins; i += kSliceThreads)
    if (count[i]) {
      atomicAdd(&w.bin_count[r * kBins + i], count[i]);
      atomicAdd(&w.bin_mass[r * kBins + i], mass[i]);
    }
}

// One block of kBins threads per row: the row's state, and for rows cut in order the last bin of
// the candidates and the sort's segments. A top-p row is drawn from its bins (walk) when every bin
// up to the cut's holds at most kWalkBin values; its candidates end at the cut's bin. Otherwise
// they end at the first bin whose running count reaches top_k (the top-k sum needs all k), or
// without top-k the first whose running mass exceeds top_p of the whole (with the margin).
__global__ void __launch_bounds__(kBins) threshold_kernel(const SampleParams* params, Slicing sl, Work w) {
  using ScanU = cub::BlockScan<unsigned, kBins>;
  using ScanD = cub::BlockScan<double, kBins>;
  using MinI = cub::BlockReduce<int, kBins>;
  __shared__ union {
    typename ScanU::TempStorage u;
    typename ScanD::TempStorage d;
    typename MinI::TempStorage min;
  } tmp;
  __shared__ int shared_last, shared_count, shared_walk, group_of[kBins], group_start[kBins + 1];
  __shared__ double shared_sum, shared_lo, shared_hi;
  const int64_t r = blockIdx.x;
  const SampleParams p = params[r];
  const bool ordered = needs_order(p, sl.V);
  if (threadIdx.x < 32) {
    const double sum = p.temperature > 0.0f ? row_sum(w.slice_sum, r, sl.slices) : 0.0;
    if (threadIdx.x == 0) shared_sum = sum;
  }
  __syncthreads();
  const double sum = shared_sum;
  int last = -1, u_first = 1, u_last = 0;
  unsigned count = 0;
  bool walk = false;
  if (ordered) {
    const unsigned own = w.bin_count[r * kBins + threadIdx.x];
    const double own_mass = w.bin_mass[r * kBins + threadIdx.x];
    double mass, total;
    ScanU(tmp.u).InclusiveSum(own, count);
    __syncthreads();
    ScanD(tmp.d).InclusiveSum(own_mass, mass, total);
    __syncthreads();
    // A walk's cut bin: the first whose running mass reaches top_p of the row's sum (the walk's
    // own test); it needs every bin up to it small. Else the bins for sorting, with the margin.
    if (may_walk(p, sl.V)) {
      const int cut = MinI(tmp.min).Reduce(mass / sum >= double(p.top_p) ? int(threadIdx.x) : INT_MAX, Smaller());
      if (threadIdx.x == 0) shared_last = cut;
      __syncthreads();
      const int big = MinI(tmp.min).Reduce(own > unsigned(kWalkBin) ? int(threadIdx.x) : INT_MAX, Smaller());
      if (threadIdx.x == 0) shared_walk = shared_last != INT_MAX && big > shared_last;
      __syncthreads();
      walk = shared_walk;
    }
    const bool reached = top_k_cuts(p, sl.V) ? count >= unsigned(p.top_k)
                                             : mass > double(p.top_p) * (1.0 + kMassMargin) * total;
    if (!walk) last = MinI(tmp.min).Reduce(reached ? int(threadIdx.x) : INT_MAX, Smaller());
    if (threadIdx.x == 0 && !walk) shared_last = last == INT_MAX ? kBins - 1 : last;
    __syncthreads();
    last = shared_last;
    const int bin = int(threadIdx.x);
    if (walk) {
      // The walk draws at u times the mass up to the cut (fractions of the row's sum): at least u
      // times the mass before the cut's bin, at most u times that and the bin's own. The bins
      // before the cut's whose spans meet that range, with the margin, and a bin more each side
      // (sample_kernel scans the masses in another order).
      if (bin == last) {
        const double before_cut = (mass - own_mass) / sum;
        shared_lo = p.u * before_cut * (1.0 - kMassMargin);
        shared_hi = p.u * (before_cut + own_mass / sum) * (1.0 + kMassMargin);
      }
      __syncthreads();
      const bool meets = bin < last && mass / sum > shared_lo && (mass - own_mass) / sum <= shared_hi;
      const int lowest = MinI(tmp.min).Reduce(meets ? bin : INT_MAX, Smaller());
      __syncthreads();
      const int highest = MinI(tmp.min).Reduce(meets ? -bin : INT_MAX, Smaller());
      if (lowest != INT_MAX) u_first = max(lowest - 1, 0), u_last = min(-highest + 1, last - 1);  // thread 0's
    }
    // The candidates in bin order from the row's start.
    const int before = int(count - own);
    w.bin_fill[r * kBins + bin] = int(r * sl.V) + before;
    if (bin == last) shared_count = int(count);
    __syncthreads();
    if (!walk) {
      // The sort's segments: the bins grouped into sl.groups runs of about equal counts (a group
      // with no bin of its own is empty).
      const int candidates = shared_count;
      group_of[bin] = int(int64_t(before) * sl.groups / max(candidates, 1));
      group_start[bin] = candidates;
      if (bin == 0) group_start[kBins] = candidates;
      __syncthreads();
      if (bin <= last && (bin == 0 || group_of[bin] != group_of[bin - 1]))
        for (int g = bin == 0 ? 0 : group_of[bin - 1] + 1; g <= group_of[bin]; ++g) group_start[g] = before;
      __syncthreads();
      if (bin < sl.groups) {
        w.seg_begin[r * sl.groups + bin] = int(r * sl.V) + group_start[bin];
        w.seg_end[r * sl.groups + bin] = int(r * sl.V) + group_start[bin + 1];
      }
    }
  }
  if (w.seg_begin && (!ordered || walk) && int(threadIdx.x) < sl.groups) {  // nothing of this row to sort
    w.seg_begin[r * sl.groups + threadIdx.x] = w.seg_end[r * sl.groups + threadIdx.x] = int(r * sl.V);
  }
  if (threadIdx.x < 32) {
    const MaxAt m = row_max(w.slice_max, r, sl.slices);
    if (threadIdx.x == 0)
      w.state[r] = {sum, m.v, m.i, bins_of(m), last, ordered ? shared_count : 0, walk, u_first, u_last};
  }
}

// Rows cut in order: the slice's candidates (bins up to the last; of a walk, only the bins it may
// draw from) appended to their bins' segments (a place for each bin's share reserved at once,
// then filled). Rows in id order: the slice's kept mass (the min-p mask needs the row's sum).
__global__ void __launch_bounds__(kSliceThreads) slice_select_kernel(const float* x, const SampleParams* params,
                                                                     Slicing sl, Work w) {
  using SumD = cub::BlockReduce<double, kSliceThreads>;
  __shared__ typename SumD::TempStorage tmp;
  __shared__ int fill[kBins];
  const int64_t r = blockIdx.y;
  const SampleParams p = params[r];
  if (p.temperature <= 0.0f) return;
  const RowState st = w.state[r];
  const float* xr = x + r * sl.V;
  const int64_t lo = blockIdx.x * sl.len, hi = min(sl.V, lo + sl.len);
  if (st.last_bin >= 0) {
    // The bins whose keys are written: [first, first + span] and the cut's. All up to the cut's, or
    // a walk's range for u (one test a logit: with three, every such row's pass took ~6 µs more
    // at 64 rows).
    const bool u_range = st.walk && st.u_first <= st.u_last;
    const int first = !st.walk ? 0 : u_range ? st.u_first : st.last_bin;
    const unsigned span = !st.walk ? unsigned(st.last_bin) : u_range ? unsigned(st.u_last - st.u_first) : 0u;
    auto kept = [&](int bin) { return unsigned(bin - first) <= span || bin == st.last_bin; };
    for (int i = threadIdx.x; i <= st.last_bin; i += kSliceThreads) fill[i] = 0;
    __syncthreads();
    for_slice(xr, lo, hi, p.temperature, [&](int64_t, float v) {
      const int bin = bin_of(st.bins, v);
      if (kept(bin)) atomicAdd(&fill[bin], 1);
    });
    __syncthreads();
    for (int i = threadIdx.x; i <= st.last_bin; i += kSliceThreads)
      if (fill[i]) fill[i] = atomicAdd(&w.bin_fill[r * kBins + i], fill[i]);
    __syncthreads();
    for_slice(xr, lo, hi, p.temperature, [&](int64_t j, float v) {
      const int bin = bin_of(st.bins, v);
      if (kept(bin)) w.keys[atomicAdd(&fill[bin], 1)] = uint64_t(rank_of(v)) << sl.id_bits | uint64_t(j);
    });
    return;
  }
  const double floor = p.min_p > 0.0f ? double(p.min_p) * (1.0 / st.sum) : -1.0;
  double part = 0;
  for_slice(xr, lo, hi, p.temperature, [&](int64_t, float v) {
    const double q = exp(double(v) - double(st.mx)) / st.sum;
    part += q >= floor ? q : 0.0;
  });
  const double total = SumD(tmp).Sum(part);
  if (threadIdx.x == 0) w.slice_kept[r * sl.slices + blockIdx.x] = total;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* x, const SampleParams* params, Slicing sl,
                                                           Work w, int32_t* out) {
  using Scan = cub::BlockScan<double, kThreads>;
  using ScanI = cub::BlockScan<int, kThreads>;
  using SumD = cub::BlockReduce<double, kThreads>;
  using MinI = cub::BlockReduce<int, kThreads>;
  using Sort = cub::BlockRadixSort<uint64_t, kThreads, kWalkItems>;
  static_assert(kThreads == kBins, "a walk gives each bin a thread");
  __shared__ union {
    typename Scan::TempStorage scan;
    typename ScanI::TempStorage scan_i;
    typename SumD::TempStorage sum;
    typename MinI::TempStorage min;
    typename Sort::TempStorage sort;
  } tmp;
  __shared__ double shared_d, shared_target;
  __shared__ int shared_i;
  __shared__ int64_t shared_at;

  const int64_t r = blockIdx.x;
  const SampleParams p = params[r];
  const RowState st = w.state[r];
  const int tid = threadIdx.x;
  if (p.temperature <= 0.0f) {
    if (tid == 0) out[r] = st.greedy;
    return;
  }
  const double mx = st.mx;

  // The first index in [0, limit) where `before` plus the inclusive running sum of weight(j)
  // (>= 0) reaches (reach is monotone: once true, true for every larger sum); -1 if none. Each
  // thread sums a contiguous segment, a block-wide scan gives each segment's start, and the
  // thread whose segment first reaches walks it.
  auto first_where = [&](int64_t limit, double start, auto weight, auto reach) -> int64_t {
    const int64_t seg = (limit + kThreads - 1) / kThreads;
    const int64_t b = min(limit, tid * seg), e = min(limit, b + seg);
    double own = 0, before;
#pragma unroll 8
    for (int64_t j = b; j < e; ++j) own += weight(j);  // unrolled: the loads in flight together
    Scan(tmp.scan).ExclusiveSum(own, before);
    __syncthreads();
    before += start;
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
        const double wj = weight(j);
        cum += wj;
        if (wj > 0.0) last_positive = j;
        if (wj > 0.0 && reach(cum)) at = j;
      }
      shared_at = at >= 0 ? at : last_positive;
    }
    __syncthreads();
    const int64_t at = shared_at;
    __syncthreads();
    return at;
  };
  // The last index in [0, limit) with a positive weight; -1 if none (thread 0's value).
  auto last_positive = [&](int64_t limit, auto weight) -> int64_t {
    int64_t last = -1;
    for (int64_t j = tid; j < limit; j += kThreads)
      if (weight(j) > 0.0) last = j;
    const int lowest = MinI(tmp.min).Reduce(last >= 0 ? int(-last) : INT_MAX, Smaller());
    return lowest == INT_MAX ? -1 : -int64_t(lowest);
  };
  auto block_sum = [&](double part) {
    const double total = SumD(tmp.sum).Sum(part);
    if (tid == 0) shared_d = total;
    __syncthreads();
    const double s = shared_d;
    __syncthreads();
    return s;
  };

  if (st.last_bin < 0) {
    // Id order: the slice where u lands (by the slices' kept masses, in order), then its walk.
    const float* xr = x + r * sl.V;
    const double floor = p.min_p > 0.0f ? double(p.min_p) * (1.0 / st.sum) : -1.0;
    if (tid == 0) {
      const double* kept = w.slice_kept + r * sl.slices;
      double total = 0;
      for (int b = 0; b < sl.slices; ++b) total += kept[b];
      const double target = p.u * total;
      double before = 0;
      int at = -1, last = 0;
      for (int b = 0; b < sl.slices && at < 0; ++b) {
        if (kept[b] > 0.0) last = b;
        if (kept[b] > 0.0 && before + kept[b] > target) at = b;
        else before += kept[b];
      }
      // Past the end by rounding: the last slice with kept mass (its last kept token below).
      shared_i = at >= 0 ? at : -1 - last;
      shared_d = before;
      shared_target = target;
    }
    __syncthreads();
    const int found = shared_i;
    const double before = shared_d, target = shared_target;
    __syncthreads();
    const int b = found >= 0 ? found : -1 - found;
    const int64_t lo = b * sl.len, len = min(sl.V, lo + sl.len) - lo;
    auto kept = [&](int64_t j) {
      const double q = exp(double(scaled(xr[lo + j], p.temperature)) - mx) / st.sum;
      return q >= floor ? q : 0.0;
    };
    int64_t pick = found >= 0 ? first_where(len, before, kept, [&](double cum) { return cum > target; }) : -1;
    if (pick < 0) pick = last_positive(len, kept);
    if (tid == 0) out[r] = int32_t(lo + (pick > 0 ? pick : 0));
    return;
  }

  if (st.walk) {
    // The bins up to the cut's, by their masses: each bin's mass before it and its candidates'
    // place (unsorted) in keys.
    __shared__ double mass_before[kBins];
    __shared__ int bin_first[kBins];
    __shared__ uint64_t bin_keys[kWalkBin];
    const int last = st.last_bin;
    const int own = tid <= last ? int(w.bin_count[r * kBins + tid]) : 0;
    double before;
    Scan(tmp.scan).ExclusiveSum(tid <= last ? w.bin_mass[r * kBins + tid] : 0.0, before);
    mass_before[tid] = before;
    __syncthreads();
    int first;
    ScanI(tmp.scan_i).ExclusiveSum(own, first);
    bin_first[tid] = first;
    __syncthreads();
    // bin_keys = bin b's candidates in the sampler's order; returns how many.
    const uint64_t* cand = w.keys + r * sl.V;
    auto sort_bin = [&](int b) {
      const int n = (b < last ? bin_first[b + 1] : st.count) - bin_first[b];
      uint64_t items[kWalkItems];
#pragma unroll
      for (int i = 0; i < kWalkItems; ++i) {
        const int at = tid * kWalkItems + i;
        items[i] = at < n ? cand[bin_first[b] + at] : ~uint64_t(0);
      }
      Sort(tmp.sort).Sort(items, 0, 32 + sl.id_bits);
#pragma unroll
      for (int i = 0; i < kWalkItems; ++i) bin_keys[tid * kWalkItems + i] = items[i];
      __syncthreads();
      return int64_t(n);
    };
    auto prob = [&](int64_t i) { return exp(double(value_of(uint32_t(bin_keys[i] >> sl.id_bits))) - mx) / st.sum; };
    // The cut in the last bin: the smallest prefix reaching top_p (the bin's end if rounding
    // leaves it short); the kept mass up to it.
    const int64_t n = sort_bin(last);
    const double at_last = mass_before[last] / st.sum;
    int64_t cut = first_where(n, at_last, prob, [&](double cum) { return cum >= double(p.top_p); });
    const int64_t keep = (cut >= 0 ? cut : n - 1) + 1;
    double part = 0;
    for (int64_t i = tid; i < keep; i += kThreads) part += prob(i);
    const double target = p.u * (at_last + block_sum(part));
    int64_t pick;
    if (target < at_last) {
      // In an earlier bin: the first whose running mass exceeds the target.
      const int b = MinI(tmp.min).Reduce(tid < last && mass_before[tid + 1] / st.sum > target ? tid : INT_MAX, Smaller());
      // Within the bins whose keys were written (threshold_kernel's margins keep it there); the range
      // is read here rather than kept in st, which cost this kernel a spilled register.
      if (tid == 0) shared_i = min(max(b == INT_MAX ? last - 1 : b, w.state[r].u_first), w.state[r].u_last);
      __syncthreads();
      const int at = shared_i;
      __syncthreads();
      const int64_t m = sort_bin(at);
      pick = first_where(m, mass_before[at] / st.sum, prob, [&](double cum) { return cum > target; });
      if (pick < 0) pick = last_positive(m, prob);
    } else {
      pick = first_where(keep, at_last, prob, [&](double cum) { return cum > target; });
      if (pick < 0) pick = last_positive(keep, prob);
    }
    if (tid == 0) out[r] = int32_t(bin_keys[pick > 0 ? pick : 0] & ((uint64_t(1) << sl.id_bits) - 1));
    return;
  }

  // In order: the row's candidates, sorted.
  const int count = st.count;
  const uint64_t* keys = w.sorted + r * sl.V;
  const uint64_t id_mask = (uint64_t(1) << sl.id_bits) - 1;
  auto value = [&](int64_t j) { return value_of(uint32_t(keys[j] >> sl.id_bits)); };
  const bool top_k = top_k_cuts(p, sl.V);
  const int64_t n = top_k && p.top_k < count ? p.top_k : count;
  // The candidates' sum: the top k's, or the whole row's.
  double part = 0;
  if (top_k)
    for (int64_t j = tid; j < n; j += kThreads) part += exp(double(value(j)) - mx);
  const double sum = top_k ? block_sum(part) : st.sum;
  auto prob = [&](int64_t j) { return exp(double(value(j)) - mx) / sum; };

  // Top-p: the smallest prefix whose mass reaches top_p (all candidates if none does).
  int64_t keep = n;
  if (p.top_p < 1.0f) {
    const int64_t at = first_where(n, 0.0, prob, [&](double cum) { return cum >= double(p.top_p); });
    if (at >= 0) keep = at + 1;
  }
  // Min-p against the most likely token (exp(0) / sum), as a mask over the kept prefix.
  const double floor = p.min_p > 0.0f ? double(p.min_p) * (1.0 / sum) : -1.0;
  auto kept = [&](int64_t j) {
    const double q = prob(j);
    return q >= floor ? q : 0.0;
  };
  part = 0;
  for (int64_t j = tid; j < keep; j += kThreads) part += kept(j);
  const double target = p.u * block_sum(part);
  // The first kept token whose cumulative probability exceeds u * mass; else the last kept one.
  int64_t pick = first_where(keep, 0.0, kept, [&](double cum) { return cum > target; });
  if (pick < 0) pick = last_positive(keep, kept);
  if (tid == 0) out[r] = int32_t(keys[pick > 0 ? pick : 0] & id_mask);
}

int sm_count() {
  static const int n = [] {
    int dev = 0, count = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev);
    return std::max(count, 1);
  }();
  return n;
}

// About two blocks per multiprocessor over all rows, at least 1024 elements a slice; the rows'
// sort segments in one DeviceSegmentedSort call where they fit.
Slicing slicing(int64_t R, int64_t V) {
  const int64_t by_sms = (2 * sm_count() + R - 1) / R, by_len = (V + 1023) / 1024;
  Slicing sl{V, int(std::clamp<int64_t>(std::min(by_sms, by_len), 1, kMaxSlices)), 0, 0};
  sl.len = (V + sl.slices - 1) / sl.slices;
  sl.groups = int(std::clamp<int64_t>(kSortSegments / R, 1, kBins));
  while ((int64_t(1) << sl.id_bits) < V) ++sl.id_bits;
  return sl;
}

bool any_ordered(const SampleParams* host_params, int64_t R, int64_t V) {
  for (int64_t r = 0; r < R; ++r)
    if (needs_order(host_params[r], V)) return true;
  return false;
}

size_t align_up(size_t n) { return (n + 255) / 256 * 256; }

// The workspace's parts in order (null base: sizes only); returns the bytes used.
size_t carve(char* base, int64_t R, int64_t V, bool ordered, const Slicing& sl, Work* w) {
  size_t at = 0;
  auto take = [&](auto*& p, size_t count) {
    p = base && count ? reinterpret_cast<std::remove_reference_t<decltype(p)>>(base + at) : nullptr;
    at += align_up(count * sizeof(*p));
  };
  const size_t slices = size_t(R) * sl.slices, n = ordered ? size_t(R * V) : 0, bins = ordered ? size_t(R) * kBins : 0;
  take(w->slice_max, slices);
  take(w->slice_sum, slices);
  take(w->slice_kept, slices);
  take(w->state, size_t(R));
  const size_t groups = ordered ? size_t(R) * sl.groups : 0;
  take(w->seg_begin, groups);
  take(w->seg_end, groups);
  take(w->bin_fill, bins);
  take(w->bin_count, bins);  // bin_count and bin_mass are cleared together
  take(w->bin_mass, bins);
  take(w->keys, n);
  take(w->sorted, n);
  w->sort_bytes = 0;
  if (ordered)
    TESSERA_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, w->sort_bytes, w->keys, w->sorted, int(R * V),
                                                          int(std::min<int64_t>(R * sl.groups, kSortSegments)),
                                                          w->seg_begin, w->seg_end));
  w->sort_tmp = base ? base + at : nullptr;
  return at + w->sort_bytes;
}

}  // namespace

size_t sample_rows_workspace(const SampleParams* host_params, int64_t R, int64_t V) {
  if (R == 0) return 0;
  Work w{};
  return carve(nullptr, R, V, any_ordered(host_params, R, V), slicing(R, V), &w);
}

void sample_rows(const float* x, const SampleParams* params, const SampleParams* host_params, int64_t R, int64_t V,
                 void* workspace, size_t workspace_bytes, int32_t* out, cudaStream_t s) {
  if (R == 0) return;
  const bool ordered = any_ordered(host_params, R, V);
  const Slicing sl = slicing(R, V);
  Work w{};
  TESSERA_CHECK(carve(static_cast<char*>(workspace), R, V, ordered, sl, &w) <= workspace_bytes,
                "sample_rows: workspace too small");
  const dim3 slices(unsigned(sl.slices), unsigned(R));
  slice_max_kernel<<<slices, kSliceThreads, 0, s>>>(x, params, sl, w.slice_max);
  check_launch("sample_rows max");
  if (ordered)
    TESSERA_CUDA_CHECK(cudaMemsetAsync(w.bin_count, 0, reinterpret_cast<char*>(w.keys) - reinterpret_cast<char*>(w.bin_count), s));
  slice_sums_kernel<<<slices, kSliceThreads, 0, s>>>(x, params, sl, w);
  check_launch("sample_rows sums");
  threshold_kernel<<<unsigned(R), kBins, 0, s>>>(params, sl, w);
  check_launch("sample_rows threshold");
  slice_select_kernel<<<slices, kSliceThreads, 0, s>>>(x, params, sl, w);
  check_launch("sample_rows select");
  if (ordered)
    for (int64_t s0 = 0; s0 < R * sl.groups; s0 += kSortSegments)
      TESSERA_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(w.sort_tmp, w.sort_bytes, w.keys, w.sorted, int(R * V),
                                                            int(std::min<int64_t>(R * sl.groups - s0, kSortSegments)),
                                                            w.seg_begin + s0, w.seg_end + s0, s));
  sample_kernel<<<unsigned(R), kThreads, 0, s>>>(x, params, sl, w, out);
  check_launch("sample_rows");
}

void edit_logits(float* x, int64_t V, const LogitEdit* edits, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  edit_logits_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, V, edits, n);
  check_launch("edit_logits");
}

}  // namespace tessera::cuda

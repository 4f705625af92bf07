// The key splits of one (sequence, kv head) of a decode step merged inside a thread-block cluster
// (compute capability 9+; the splits are the cluster's blocks along z), instead of through
// partial results and a combine_partials launch. Used by both decode kernels on small grids.
#pragma once

#include <cooperative_groups.h>

#include <cmath>

#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {

// The portable cluster size: at most this many splits merge in a cluster.
constexpr int kMaxClusterBlocks = 8;

// Each block has left, in its shared memory, its merged sums for the group's heads: head g's
// running max (natural-log units) and sum at ml + g * ml_stride (+ 1), its unnormalised
// accumulator at acc + g * acc_stride. Each block rescales every split's sums to their common
// maximum, as combine_partials does, and writes its share of token t's G x Dh outputs. Every
// block of the cluster must call this.
__device__ __forceinline__ void merge_in_cluster(const AttentionArgs& a, int t, int kvh, const float* ml,
                                                 int ml_stride, const float* acc, int acc_stride) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int G = int(a.H / a.Hkv), Dh = int(a.Dh), split = int(blockIdx.z), splits = int(gridDim.z);
  // Every split's sums in place before any is read: release and acquire at the cluster's scope.
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  // Each output element's terms from every split (its head's max and sum, its accumulator
  // element) read together: one round trip to the other blocks' shared memory. The absent
  // splits count as empty. Each thread works out its head's factors itself, in the same order
  // as combine_partials.
  const int per = (G * Dh + splits - 1) / splits;
  for (int e = split * per + threadIdx.x; e < min(G * Dh, (split + 1) * per); e += blockDim.x) {
    const int g = e / Dh, d = e % Dh;
    float m[kMaxClusterBlocks], l[kMaxClusterBlocks], v[kMaxClusterBlocks];
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) {
      m[k] = -INFINITY, l[k] = 0.0f, v[k] = 0.0f;
      if (k < splits) {
        const float* remote = cluster.map_shared_rank(ml + g * ml_stride, k);
        m[k] = remote[0], l[k] = remote[1], v[k] = cluster.map_shared_rank(acc + g * acc_stride, k)[d];
      }
    }
    float mx = -INFINITY, sum = 0.0f, f[kMaxClusterBlocks];
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) mx = fmaxf(mx, m[k]);
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) {
      f[k] = m[k] != -INFINITY ? expf(m[k] - mx) : 0.0f;
      sum += l[k] * f[k];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float o = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) {
      f[k] *= inv;
      if (f[k] != 0.0f) o += v[k] * f[k];
    }
    store_as(a.out, a.out_dtype, (int64_t(t) * a.H + int64_t(kvh) * G + g) * Dh + d, o);
  }
  // No block leaves while another still reads its sums. The reads are done (their values are
  // stored above), so this barrier orders no memory: its arrival is relaxed.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}

}  // namespace tessera::cuda

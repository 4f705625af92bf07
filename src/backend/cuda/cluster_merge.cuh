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

// Each block has left, in its shared memory, its merged sums for the group's kGroup (or fewer)
// heads: head g's running max (natural-log units) and sum at ml + g * ml_stride (+ 1), its
// unnormalised accumulator at acc + g * acc_stride. Each block rescales every split's sums to
// their common maximum, as combine_partials does, and writes its share of token t's G x Dh outputs.
// Every block of the cluster must call this.
template <int kGroup>
__device__ __forceinline__ void merge_in_cluster(const AttentionArgs& a, int t, int kvh, const float* ml,
                                                 int ml_stride, const float* acc, int acc_stride) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int G = int(a.H / a.Hkv), Dh = int(a.Dh), split = int(blockIdx.z), splits = int(gridDim.z);
  cluster.sync();
  // Each head's factor for each split: exp(its max - the common max) / the common sum.
  __shared__ float factor[kGroup][kMaxClusterBlocks];
  if (threadIdx.x < G) {
    // The splits' maxima and sums read together (a round trip to another block's shared memory
    // each), the absent ones as empty.
    const int g = threadIdx.x;
    float m[kMaxClusterBlocks], l[kMaxClusterBlocks];
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) {
      m[k] = -INFINITY, l[k] = 0.0f;
      if (k < splits) {
        const float* remote = cluster.map_shared_rank(ml + g * ml_stride, k);
        m[k] = remote[0], l[k] = remote[1];
      }
    }
    float mx = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) mx = fmaxf(mx, m[k]);
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) {
      factor[g][k] = m[k] != -INFINITY ? expf(m[k] - mx) : 0.0f;
      sum += l[k] * factor[g][k];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k) factor[g][k] *= inv;
  }
  __syncthreads();
  const int per = (G * Dh + splits - 1) / splits;
  for (int e = split * per + threadIdx.x; e < min(G * Dh, (split + 1) * per); e += blockDim.x) {
    const int g = e / Dh, d = e % Dh;
    float o = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxClusterBlocks; ++k)
      if (factor[g][k] != 0.0f) o += cluster.map_shared_rank(acc + g * acc_stride, k)[d] * factor[g][k];
    store_as(a.out, a.out_dtype, (int64_t(t) * a.H + int64_t(kvh) * G + g) * Dh + d, o);
  }
  // No block leaves while another still reads its sums. The reads are done (their values are
  // stored above), so this barrier orders no memory: a relaxed arrival skips the GPU-wide fence
  // that cluster.sync() issues first.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}

}  // namespace tessera::cuda

// Matrix products for decode batches of 3-16 tokens on Hopper: out[T, N] = x[T, K] · w[N, K]ᵀ
// with 16-bit weights and x, accumulated in f32. At these sizes a product is bound by reading
// the weights once, and cuBLASLt's kernels give the narrow matrices (q/k/v and o of an 8B
// model) too few tiles to keep every SM's loads in flight (2.5 TB/s of the 4.3 a copy reaches).
// Here:
//  - outᵀ = w · xᵀ on the warpgroup tensor cores (wgmma, sm_90a): a block of one warpgroup
//    takes 128 weight rows (two 64-row wgmma tiles) by 16 token columns;
//  - k runs in 64-wide chunks (one 128-byte line per weight row or token) through a kStages-deep
//    cp.async pipeline into shared memory, in the 128-byte swizzled layout wgmma reads; the
//    first stages' weights are requested before the previous kernel ends;
//  - a tile's chunks are split over a cluster of blocks (the most whose clusters all fit the GPU
//    at once, up to 8), whose sums meet in distributed shared memory: each block adds one slice
//    of the tile's rows over the cluster in rank order (so every run sums in the same order)
//    and writes it straight to its part of a stacked group.
// Measured on the H200 (8B shapes, bench_cuda --breakdown): q/k/v at 8 tokens 15.5 µs against
// cuBLASLt's 20.3, o 11.7 against 13.2; wider (gate/up) and longer (down) products were as fast
// or faster under cuBLASLt, so those stay there. 17-64 tokens: narrow_gemm.cu.
#include <cooperative_groups.h>

#include <algorithm>
#include <array>

#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/wgmma.cuh"

namespace tessera::cuda {
namespace {

constexpr int kN = 16, kStages = 4, kMaxSplits = 8;
// The widest and longest products taken (q/k/v, o of models up to 8192 wide).
constexpr int64_t kMaxRows = 8192, kMaxK = 8192;

struct Layout {
  static constexpr size_t ring = kStages * TileStage<kN>::bytes;
  static constexpr int kLd = kN + 4;  // f32 sums row stride (16-byte rows, banks spread)
  static constexpr size_t sums = size_t(kTileRows) * kLd * 4;
  static constexpr size_t bytes = (ring > sums ? ring : sums) + 1024;  // + alignment
};

// Grid (splits, tiles), clusters of (splits, 1): block (q, tile) multiplies rows [128 tile,
// 128 tile + 128) of the stacked weights over its share of the k chunks.
template <class W, class O>
__global__ void __launch_bounds__(kTileThreads)
    skinny_gemm_kernel(const W* __restrict__ x, StackedParts g, int T, int64_t K, int64_t N) {
#ifdef TESSERA_WGMMA
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);  // swizzle atoms are 1 KB aligned

  const int split = blockIdx.x, splits = gridDim.x, tid = threadIdx.x;
  const int64_t row0 = int64_t(blockIdx.y) * kTileRows, chunks = K / kTileChunk;
  const int64_t c_begin = split * chunks / splits, count = (split + 1) * chunks / splits - c_begin;

  // This thread's weight lines tid / 8 + 16 i (tile_products).
  const W* src[8];
  bool live[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t n = row0 + tid / 8 + 16 * i;
    live[i] = n < N;
    const PartRow part = part_row(g, live[i] ? n : N - 1);  // rows past N read row N - 1, zero-filled
    src[i] = static_cast<const W*>(part.w) + ((live[i] ? n : N - 1) - part.first) * K;
  }
  float acc[2][kN / 2];
  tile_products<W, kN, kStages>(smem, src, live, x, T, K, c_begin, count, acc);
  __syncthreads();  // every stage is idle: the sums take their place

  // This block's sums [128 rows][16 tokens]: accumulator e of tile m holds row 64 m + 16 warp +
  // lane / 4 (+ 8 for e % 4 >= 2), token 8 (e / 4) + 2 (lane % 4) (+ 1 for odd e).
  float* sums = reinterpret_cast<float*>(smem);
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int e = 0; e < kN / 2; e += 2) {
      const int r = 64 * m + 16 * warp + lane / 4 + 8 * ((e % 4) / 2), t = 8 * (e / 4) + 2 * (lane % 4);
      *reinterpret_cast<float2*>(sums + r * Layout::kLd + t) = make_float2(acc[m][e], acc[m][e + 1]);
    }
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's sums are visible to the cluster
  // This block's slice of the rows, summed over the cluster in rank order, 4 tokens at a time;
  // every block's values are requested before the first is added (each is a round trip).
  const float* peer[kMaxSplits];
#pragma unroll
  for (int q = 0; q < kMaxSplits; ++q) peer[q] = cluster.map_shared_rank(sums, q < splits ? q : 0);
  const int r_begin = split * kTileRows / splits, rows = (split + 1) * kTileRows / splits - r_begin;
  const int groups = (T + 3) / 4;
  for (int e = tid; e < rows * groups; e += kTileThreads) {
    const int r = r_begin + e % rows, t0 = 4 * (e / rows);
    const int64_t n = row0 + r;
    if (n >= N) continue;
    float4 sum[kMaxSplits];
#pragma unroll
    for (int q = 0; q < kMaxSplits; ++q)
      if (q < splits) sum[q] = *reinterpret_cast<const float4*>(peer[q] + r * Layout::kLd + t0);
    float4 v = sum[0];
#pragma unroll
    for (int q = 1; q < kMaxSplits; ++q)
      if (q < splits) v.x += sum[q].x, v.y += sum[q].y, v.z += sum[q].z, v.w += sum[q].w;
    const PartRow part = part_row(g, n);
    O* out = static_cast<O*>(part.out) + (n - part.first);
    const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (t0 + j < T) out[(t0 + j) * part.width] = from_f32<O>(vs[j]);
  }
  cluster.sync();  // no block leaves while another still reads its sums
#endif
}

// A launch of `tiles` clusters of `splits` blocks, as a programmatic dependent of the stream's last kernel.
cudaLaunchConfig_t config(int splits, int64_t tiles, cudaStream_t s, cudaLaunchAttribute (&attrs)[2]) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(splits), unsigned(tiles));
  cfg.blockDim = dim3(kTileThreads);
  cfg.dynamicSmemBytes = Layout::bytes;
  cfg.stream = s;
  attrs[0] = {};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = unsigned(splits);
  attrs[0].val.clusterDim.y = attrs[0].val.clusterDim.z = 1;
  attrs[1] = {};
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  return cfg;
}

template <class W, class O>
void launch(const W* x, const StackedParts& g, int64_t T, int64_t K, cudaStream_t s) {
  // Clusters that fit the GPU at once, for each cluster size (its blocks share one GPC).
  static const std::array<int, kMaxSplits + 1> resident = [] {
    check(cudaFuncSetAttribute(skinny_gemm_kernel<W, O>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(Layout::bytes)),
          "skinny gemm shared memory");
    std::array<int, kMaxSplits + 1> r{};
    for (int c = 1; c <= kMaxSplits; ++c) {
      cudaLaunchAttribute attrs[2];
      cudaLaunchConfig_t cfg = config(c, 1, nullptr, attrs);
      cfg.numAttrs = 1;  // the cluster shape only
      check(cudaOccupancyMaxActiveClusters(&r[c], skinny_gemm_kernel<W, O>, &cfg), "skinny gemm clusters");
    }
    return r;
  }();
  const int64_t N = g.rows_end[g.count - 1], tiles = (N + kTileRows - 1) / kTileRows, chunks = K / kTileChunk;
  // The most splits of each tile's k range whose clusters all fit in one wave.
  int splits = 1;
  for (int c = 2; c <= std::min<int64_t>(kMaxSplits, chunks); ++c)
    if (tiles <= resident[c]) splits = c;
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg = config(splits, tiles, s, attrs);
  check(cudaLaunchKernelEx(&cfg, skinny_gemm_kernel<W, O>, x, g, int(T), K, N), "skinny gemm launch");
}

}  // namespace

bool skinny_gemm(const void* x, const StackedParts& g, DType dtype, DType out_dtype, int64_t T, int64_t K,
                 cudaStream_t s) {
  bool ok = sm90a_runs() && T >= kSkinnyMinTokens && T <= kSkinnyMaxTokens && K % kTileChunk == 0 && K <= kMaxK &&
            g.count >= 1 && g.count <= StackedParts::kMaxParts && g.rows_end[g.count - 1] <= kMaxRows &&
            aligned16(x) && (dtype == DType::BF16 || dtype == DType::F16) &&
            (out_dtype == DType::F32 || out_dtype == dtype);
  for (int p = 0; ok && p < g.count; ++p) ok = aligned16(g.w[p]);
  if (!ok) return false;
  if (dtype == DType::BF16) {
    if (out_dtype == DType::F32) launch<__nv_bfloat16, float>(static_cast<const __nv_bfloat16*>(x), g, T, K, s);
    else launch<__nv_bfloat16, __nv_bfloat16>(static_cast<const __nv_bfloat16*>(x), g, T, K, s);
  } else {
    if (out_dtype == DType::F32) launch<__half, float>(static_cast<const __half*>(x), g, T, K, s);
    else launch<__half, __half>(static_cast<const __half*>(x), g, T, K, s);
  }
  check_launch("skinny gemm");
  return true;
}

}  // namespace tessera::cuda

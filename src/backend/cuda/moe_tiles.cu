// A mixture's expert products on Hopper's tensor cores, for prompts and decode batches from
// kExpertTilesMinTokens (moe.cu's GEMV form multiplies every weight piece with f32 activations
// reread for each pair; past 512 tokens the host grouped the tokens instead). Measured on the H200
// (bench_engine, Qwen3-30B-A3B's shape, 12 layers, decode tok/s all at once, tiles / GEMV form):
// 4,884 / 4,362 at 16 sequences, 7,539 / 6,276 at 32, 13,340 / 8,767 at 64; level at 2-8
// (tiles from 8: 3,012 / 3,005), slower at one (944 / 1,024). Prefill of 512-token prompts, 64 at
// once: 125,854 against 46,285 tok/s grouped on the host. After moe.cu's grouping:
//  - gather: each place's row of h, rounded to the weights' 16-bit format (x16), so that a tile
//    of an expert's pairs is kExpertTileTokens consecutive rows;
//  - gate/up: block (tile, g) multiplies 64 rows of the tile's expert's gate and the same rows of
//    its up with the tile's rows (wgmma.cuh's tile: one warpgroup, 128 weight lines by 64 token
//    columns, k through a cp.async ring) and writes act(gate) * up, 16-bit, as down's input;
//  - down: block (tile, g) multiplies 128 rows of the expert's down, writing f32 by place for
//    moe.cu's weighted combine.
// A tile's weights are read once for its up to 64 pairs; an expert's tiles share their row
// groups' weights through L2 (the tiles vary fastest in the grid).
#include "backend/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/wgmma.cuh"

namespace tessera::cuda {
namespace {

constexpr int kN = kExpertTileTokens;
constexpr int kStages = 4;  // narrow_gemm.cu's MLP form: two blocks an SM
constexpr size_t kSmemBytes = kStages * TileStage<kN>::bytes + 1024;  // + 1 KB for alignment
constexpr int kGatherThreads = 256;

// Block (p, c): x16[p, 8 (c kGatherThreads + thread) ..] = h[pair_at[p] / k] in W; rows past the
// last place (pair_at -1) are left alone (no tile reads them).
template <class W>
__global__ void gather_kernel(const float* __restrict__ h, const int32_t* __restrict__ pair_at, int k, int64_t H,
                              W* __restrict__ x16) {
  wait_for_previous();
  allow_next();
  const int64_t p = blockIdx.x, c = (int64_t(blockIdx.y) * kGatherThreads + threadIdx.x) * 8;
  const int pair = pair_at[p];
  if (pair < 0 || c >= H) return;
  float f[8];
  load8(h + int64_t(pair / k) * H + c, f);
  store8(x16 + p * H + c, f);
}

// Block (t, g) of tile t = (e, begin, end, 0) (e < 0: none). kGlu: w is [E, 2N, K] (each expert's
// gate rows, then its up rows), the block takes rows 64 g .. + 64 of both and writes out [P, N]
// (W) = act(gate · x) * (up · x); else w is [E, N, K], rows 128 g .. + 128, out [P, N] (f32).
template <class W, bool kGlu, bool kGelu>
__global__ void __launch_bounds__(kTileThreads)
    expert_tiles_kernel(const W* __restrict__ x, const W* __restrict__ w, int64_t N, int64_t K,
                        const int4* __restrict__ tiles, void* __restrict__ out) {
#ifdef TESSERA_WGMMA
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);  // swizzle atoms are 1 KB aligned
  wait_for_previous();  // the tiles are the grouping's (two kernels back; each waited for its own)
  const int4 tile = tiles[blockIdx.x];
  constexpr int kRows = kGlu ? 64 : kTileRows;
  const int64_t r0 = int64_t(blockIdx.y) * kRows;
  if (tile.x < 0) return;
  const W* expert = w + int64_t(tile.x) * (kGlu ? 2 : 1) * N * K;
  const int tid = threadIdx.x;
  const W* src[8];  // this thread's weight lines tid / 8 + 16 i (tile_products)
  bool live[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int l = tid / 8 + 16 * i;
    const int64_t n = r0 + (kGlu ? l % 64 : l);
    live[i] = n < N;
    src[i] = expert + (kGlu && l >= 64 ? N * K : 0) + (live[i] ? n : r0) * K;  // rows past N zero-filled
  }
  const int T = tile.z - tile.y;
  float acc[2][kN / 2];
  tile_products<W, kN, kStages>(smem, src, live, x + int64_t(tile.y) * K, T, K, 0, K / kTileChunk, acc);

  for_each_acc<kN, kGlu ? 1 : 2>([&](int m, int e, int l, int t) {
    const int64_t n = r0 + l, row = int64_t(tile.y) + t;
    if (n >= N || t >= T) return;
    if constexpr (kGlu) static_cast<W*>(out)[row * N + n] = from_f32<W>(glu_times<kGelu>(acc[0][e], acc[1][e]));
    else static_cast<float*>(out)[row * N + n] = acc[m][e];
  });
#endif
}

template <class W, bool kGlu, bool kGelu>
void launch_tiles(const W* x, const void* w, int64_t N, int64_t K, const int32_t* tiles, int64_t num_tiles, void* out,
                  cudaStream_t s) {
  auto kernel = expert_tiles_kernel<W, kGlu, kGelu>;
  static const bool limit_set = [&] {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)),
          "expert tiles shared memory");
    return true;
  }();
  (void)limit_set;
  constexpr int64_t rows = kGlu ? 64 : kTileRows;
  launch_dependent(kernel, dim3(unsigned(num_tiles), unsigned((N + rows - 1) / rows)), dim3(kTileThreads), kSmemBytes,
                   s, x, static_cast<const W*>(w), N, K, reinterpret_cast<const int4*>(tiles), out);
}

template <class W>
void launch(Glu act, const ExpertsArgs& a, cudaStream_t s) {
  const int64_t P = a.T * a.k, num_tiles = expert_tiles_max(P, a.E);
  W* x16 = static_cast<W*>(a.x16);
  launch_dependent(gather_kernel<W>, dim3(unsigned(P), unsigned((a.H / 8 + kGatherThreads - 1) / kGatherThreads)),
                   dim3(kGatherThreads), 0, s, a.h, a.pair_at, int(a.k), a.H, x16);
  if (act == Glu::GeGLU)
    launch_tiles<W, true, true>(x16, a.gate_up, a.I, a.H, a.tiles, num_tiles, a.mid, s);
  else
    launch_tiles<W, true, false>(x16, a.gate_up, a.I, a.H, a.tiles, num_tiles, a.mid, s);
  launch_tiles<W, false, false>(static_cast<const W*>(a.mid), a.down, a.H, a.I, a.tiles, num_tiles, a.out, s);
}

}  // namespace

bool expert_tiles_apply(DType dt, int64_t T, int64_t H, int64_t I) {
  static const bool enabled = !switched_off("TESSERA_CUDA_MOE_TILES");
  return enabled && sm90a_runs() && T >= kExpertTilesMinTokens && (dt == DType::BF16 || dt == DType::F16) &&
         H % kTileChunk == 0 && I % kTileChunk == 0;
}

void expert_tiles(Glu act, DType dt, const ExpertsArgs& a, cudaStream_t s) {
  if (dt == DType::BF16) launch<__nv_bfloat16>(act, a, s);
  else launch<__half>(act, a, s);
  check_launch("moe expert tiles");
}

}  // namespace tessera::cuda

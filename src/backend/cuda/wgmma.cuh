// Hopper's warpgroup matrix products (wgmma, sm_90a) over shared-memory tiles in the 128-byte
// swizzled K-major layout, and the tile the decode products share (skinny_gemm.cu,
// narrow_gemm.cu).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/device_types.cuh"

// wgmma and clusters exist in the sm_90a pass only; the kernels using them are empty elsewhere
// and the host never launches them off compute capability 9.0.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TESSERA_WGMMA 1
#endif

namespace tessera::cuda {

// The decode products' tile: one warpgroup multiplies 128 weight rows (two 64-row wgmma tiles) by
// kN token columns, k in 64-wide chunks. A ring stage holds kCps consecutive chunks: for each, the
// 128 weight lines of 128 bytes; then for each, the kN lines of x; each in the swizzled layout.
constexpr int kTileRows = 128, kTileChunk = 64, kTileThreads = 128;
template <int kN, int kCps = 1>
struct TileStage {
  static constexpr size_t w_chunk = size_t(kTileRows) * kTileChunk * 2;  // 16 KB
  static constexpr size_t x_chunk = size_t(kN) * kTileChunk * 2;
  static constexpr size_t w_bytes = kCps * w_chunk;
  static constexpr size_t bytes = w_bytes + kCps * x_chunk;  // a multiple of the 1 KB swizzle atom
};

#ifdef TESSERA_WGMMA
// The 16-byte piece p of line r (128 bytes) of a 128-byte-swizzled tile: pieces are permuted
// within each line by the line's index mod 8, so eight lines of an atom spread over all banks.
__device__ __forceinline__ int swizzled(int line, int piece) { return line * 128 + ((piece ^ (line & 7)) << 4); }

// A shared-memory matrix descriptor for a K-major operand in that layout: 8-line groups 1 KB
// apart (stride 64 × 16 bytes), leading offset unused (1), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t descriptor(const void* p) {
  return uint64_t((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(64) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Shared memory written through the generic proxy (cp.async), read next by wgmma (async proxy).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d[64 × kN] += a[64 × 16] · b[16 × kN], both K-major in shared memory. Thread t of the
// warpgroup holds d[e] at row 16 (t / 32) + (t % 32) / 4 (+ 8 for e % 4 >= 2), column
// 8 (e / 4) + 2 (t % 4) (+ 1 for odd e).
template <class W, int kN>
__device__ __forceinline__ void wgmma(float (&d)[kN / 2], uint64_t a, uint64_t b);

#define TESSERA_F8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                      "+f"(d[i + 6]), "+f"(d[i + 7])
// The specialisation for kN = N: the accumulators' operand numbers in the instruction (REGS, then
// the descriptors' A and B), the accumulators as asm outputs after them.
#define TESSERA_WGMMA_N(T, PTX, N, REGS, A, B, ...)                                                    \
  template <>                                                                                          \
  __device__ __forceinline__ void wgmma<T, N>(float (&d)[N / 2], uint64_t a, uint64_t b) {            \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " {" REGS "}, " A ", " \
                 B ", 1, 1, 1, 0, 0;\n"                                                                \
                 : __VA_ARGS__                                                                         \
                 : "l"(a), "l"(b));                                                                    \
  }
#define TESSERA_R8(a, b, c, d, e, f, g, h) "%" #a ", %" #b ", %" #c ", %" #d ", %" #e ", %" #f ", %" #g ", %" #h
#define TESSERA_R16 TESSERA_R8(0, 1, 2, 3, 4, 5, 6, 7)
#define TESSERA_R32 TESSERA_R16 ", " TESSERA_R8(8, 9, 10, 11, 12, 13, 14, 15)
#define TESSERA_R64 \
  TESSERA_R32 ", " TESSERA_R8(16, 17, 18, 19, 20, 21, 22, 23) ", " TESSERA_R8(24, 25, 26, 27, 28, 29, 30, 31)
#define TESSERA_WGMMA_FOR(T, PTX)                                                                  \
  TESSERA_WGMMA_N(T, PTX, 16, TESSERA_R16, "%8", "%9", TESSERA_F8(0))                              \
  TESSERA_WGMMA_N(T, PTX, 32, TESSERA_R32, "%16", "%17", TESSERA_F8(0), TESSERA_F8(8))             \
  TESSERA_WGMMA_N(T, PTX, 64, TESSERA_R64, "%32", "%33", TESSERA_F8(0), TESSERA_F8(8), TESSERA_F8(16), \
                  TESSERA_F8(24))
TESSERA_WGMMA_FOR(__nv_bfloat16, "bf16")
TESSERA_WGMMA_FOR(__half, "f16")
#undef TESSERA_WGMMA_FOR
#undef TESSERA_WGMMA_N
#undef TESSERA_R8
#undef TESSERA_R16
#undef TESSERA_R32
#undef TESSERA_R64
#undef TESSERA_F8

// acc[m] = weight lines [64 m, 64 m + 64) of the tile · x's first T tokens (rows K apart), over k
// chunks [c_begin, c_begin + count), streamed through a kStages-deep cp.async ring at smem (1 KB
// aligned) of kCps chunks a stage, the chunks past the range in the last one zero-filled. Thread t
// copies piece t % 8 of weight lines t / 8 + 16 i from src[i] (zeros where !live[i]), a line's
// chunks in a stage one after the other, and x items t + 128 i. The first stages' weights are
// requested before the previous kernel has finished (they are only read), x after. Returns with
// every copy landed; the block must sync before it reuses the ring's memory.
template <class W, int kN, int kStages, int kCps = 1>
__device__ __forceinline__ void tile_products(unsigned char* smem, const W* const (&src)[8], const bool (&live)[8],
                                              const W* x, int T, int64_t K, int64_t c_begin, int64_t count,
                                              float (&acc)[2][kN / 2]) {
  using S = TileStage<kN, kCps>;
  auto w_stage = [&](int st, int j) { return smem + st * S::bytes + j * S::w_chunk; };
  auto x_stage = [&](int st, int j) { return smem + st * S::bytes + S::w_bytes + j * S::x_chunk; };
  const int tid = threadIdx.x, piece = tid % 8;
  const int64_t stages = (count + kCps - 1) / kCps, c_end = c_begin + count;
  // Whether chunk c of a stage lies in the range (always, one chunk a stage).
  auto in_range = [&](int64_t c) { return kCps == 1 || c < c_end; };
  auto issue_w = [&](int64_t c, int st) {  // the stage whose first chunk is c
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < kCps; ++j)
        cp_async16(w_stage(st, j) + swizzled(tid / 8 + 16 * i, piece),
                   src[i] + (in_range(c + j) ? c + j : c) * kTileChunk + piece * 8, live[i] && in_range(c + j));
  };
  auto issue_x = [&](int64_t c, int st) {
#pragma unroll
    for (int j = 0; j < kCps; ++j)
#pragma unroll
      for (int i = 0; i < kN * 8 / kTileThreads; ++i) {
        const int item = tid + kTileThreads * i, t = item / 8, p = item % 8;
        const bool ok = t < T && in_range(c + j);
        cp_async16(x_stage(st, j) + swizzled(t, p), x + (ok ? t * K + (c + j) * kTileChunk + p * 8 : 0), ok);
      }
  };

  for (int st = 0; st < kStages - 1; ++st)
    if (st < stages) issue_w(c_begin + st * kCps, st);
  wait_for_previous();
  allow_next();
  for (int st = 0; st < kStages - 1; ++st)
    if (st < stages) issue_x(c_begin + st * kCps, st);
  cp_async_commit();
  for (int st = 1; st < kStages - 1; ++st) cp_async_commit();  // one group per stage from here on

#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int e = 0; e < kN / 2; ++e) acc[m][e] = 0.0f;
  for (int64_t i = 0; i < stages; ++i) {
    const int st = int(i % kStages);
    cp_async_wait<kStages - 2>();
    fence_async_shared();
    __syncthreads();  // stage st is in shared memory for the warpgroup; the stage refilled next is free
    if (i + kStages - 1 < stages) {
      const int next = int((i + kStages - 1) % kStages);
      issue_w(c_begin + (i + kStages - 1) * kCps, next);
      issue_x(c_begin + (i + kStages - 1) * kCps, next);
    }
    cp_async_commit();
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kCps; ++j)
#pragma unroll
      for (int kk = 0; kk < kTileChunk / 16; ++kk) {  // 16 k = 32 bytes along each line
        const uint64_t b = descriptor(x_stage(st, j) + kk * 32);
        wgmma<W, kN>(acc[0], descriptor(w_stage(st, j) + kk * 32), b);
        wgmma<W, kN>(acc[1], descriptor(w_stage(st, j) + 64 * 128 + kk * 32), b);
      }
    wgmma_commit();
    wgmma_wait_all();
  }
  cp_async_wait<0>();
}

// f(m, e, line, token) for each of this thread's accumulators acc[m][e] of tile_products' first
// kTiles tiles: tile line 64 m + 16 warp + lane / 4 (+ 8 for e % 4 >= 2), token 8 (e / 4) +
// 2 (lane % 4) (+ 1 for odd e).
template <int kN, int kTiles, class F>
__device__ __forceinline__ void for_each_acc(const F& f) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int m = 0; m < kTiles; ++m)
#pragma unroll
    for (int e = 0; e < kN / 2; ++e)
      f(m, e, 64 * m + 16 * warp + lane / 4 + 8 * ((e % 4) / 2), 8 * (e / 4) + 2 * (lane % 4) + e % 2);
}
#endif

}  // namespace tessera::cuda

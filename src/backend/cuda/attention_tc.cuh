// The tensor-core attention kernels' shared parts (attention_tc.cu, attention_tc_decode.cu): the
// mma.sync and ldmatrix wrappers, the paged K/V tile loader and the online-softmax step over S
// accumulators. bf16 K/V caches; tiles of kKeys keys, blocks of kWarps warps.
#pragma once

#include <cmath>

#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda::tc {

using KV = __nv_bfloat16;

// Raises Kernel's dynamic shared-memory limit to `bytes`, once per kernel (host code).
template <auto Kernel>
void allow_shared_memory(size_t bytes, const char* what) {
  static const bool raised =
      (check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), what), true);
  (void)raised;
}

// The shared memory of a kernel that stages tiles, by its layout L: Q's rows at L::q, then two
// buffers of [K, V] tiles of L::tile bytes each from L::kv.
template <class L>
struct StagedTiles {
  unsigned char* base;
  __device__ __forceinline__ KV* q() const { return reinterpret_cast<KV*>(base + L::q); }
  __device__ __forceinline__ KV* k(int buf) const { return reinterpret_cast<KV*>(base + L::kv + (2 * buf) * L::tile); }
  __device__ __forceinline__ KV* v(int buf) const {
    return reinterpret_cast<KV*>(base + L::kv + (2 * buf + 1) * L::tile);
  }
};

constexpr int kRows = 64, kKeys = 64, kWarps = 4, kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// d += a · b for one m16n8k16 tile (a: 4 registers of bf16 pairs, b: 2, d: 4 f32).
__device__ __forceinline__ void mma(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The same with f16 pairs.
__device__ __forceinline__ void mma_f16(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// 2^x on the special function unit (2^-inf = 0); the weights are rounded to bf16 right after.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

// Keys j0 .. j0 + kKeys - 1 of kv head kvh gathered from the paged cache into a K and a V tile
// (rows kLd apart) with cp.async, as one commit group; keys past `last` are zero-filled. A thread
// moves the same 16-byte piece of every kRowStep-th key: the first key's page is found by one
// division and the later ones by stepping (dividing per key by the run-time block size made the
// address arithmetic the largest share of the decode kernel's instructions, ~40%).
template <int DH, int kLd>
__device__ __forceinline__ void load_kv_tile(const AttentionArgs& a, const int32_t* table, int kvh, int j0, int last,
                                             KV* k_tile, KV* v_tile) {
  constexpr int kChunks = DH / 8, kRowStep = kThreads / kChunks;  // 16-byte pieces of a row; keys a pass
  static_assert(kThreads % kChunks == 0 && kKeys % kRowStep == 0, "whole keys per pass");
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  const int ch = threadIdx.x % kChunks, bs = a.block_size;
  const int64_t row = int64_t(a.Hkv) * DH, piece = int64_t(kvh) * DH + ch * 8;
  int kk = threadIdx.x / kChunks, j = j0 + kk, page = j / bs, in_page = j - page * bs;
#pragma unroll 4
  for (; kk < kKeys; kk += kRowStep, j += kRowStep) {
    const bool valid = j <= last;
    const int64_t off = valid ? int64_t(table[page] * bs + in_page) * row + piece : 0;
    cp_async16(k_tile + kk * kLd + ch * 8, kc + off, valid);
    cp_async16(v_tile + kk * kLd + ch * 8, vc + off, valid);
    for (in_page += kRowStep; in_page >= bs; in_page -= bs) ++page;
  }
  cp_async_commit();
}

// The top of a double-buffered tile loop: starts the next tile's copies (if any) into the other
// buffer, waits for this tile's and makes them visible to the block; returns this tile's buffer.
template <class Load>
__device__ __forceinline__ int tile_ready(int tile, int tile_begin, int tile_end, Load load_tile) {
  const int buf = (tile - tile_begin) & 1;
  if (tile + 1 < tile_end) {
    load_tile(tile + 1, buf ^ 1);
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
  return buf;
}

// One tile's online-softmax step for this thread's two rows (h = 0, 1), whose S accumulators
// s[n] cover keys j0 + 8n + {0, 1}: scores scaled (or capped) into log2 units, keys outside a
// row's [first, last] masked, the running max m, sum l and output o updated, and P = exp2(S -
// max) left as bf16 A operands of P·V (the accumulators of key blocks 2k and 2k+1 are exactly
// the A fragment of keys 16k..16k+15).
template <int NT, int DH>
__device__ __forceinline__ void softmax_step(const AttentionArgs& a, float (&s)[NT][4], int j0, const int first[2],
                                             const int last[2], float m[2], float l[2], float (&o)[DH / 8][4],
                                             unsigned (&pa)[NT / 2][4]) {
  const float qk_scale = a.scale * kLog2e;  // log2 units: exp2 is the fast exponential
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2, j = j0 + 8 * n + (e & 1);
      float v = s[n][e];
      if (a.softcap > 0.0f) v = a.softcap * tanhf(v * a.scale / a.softcap) * kLog2e;
      else v *= qk_scale;
      v = j >= first[h] && j <= last[h] ? v : -INFINITY;
      s[n][e] = v;
      mx[h] = fmaxf(mx[h], v);
    }
  }
  float corr[2], base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // the row maxima over the 4 lanes that share a row
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(m[h], mx[h]);
    base[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: every weight is 0
    corr[h] = fast_exp2(m[h] - base[h]);
    m[h] = m_new;
    l[h] *= corr[h];
  }
#pragma unroll
  for (int n = 0; n < DH / 8; ++n) {
    o[n][0] *= corr[0], o[n][1] *= corr[0];
    o[n][2] *= corr[1], o[n][3] *= corr[1];
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    float p0 = fast_exp2(s[n][0] - base[0]), p1 = fast_exp2(s[n][1] - base[0]);
    float p2 = fast_exp2(s[n][2] - base[1]), p3 = fast_exp2(s[n][3] - base[1]);
    l[0] += p0 + p1, l[1] += p2 + p3;
    pa[n / 2][(n & 1) * 2] = pack_bf16(p0, p1);
    pa[n / 2][(n & 1) * 2 + 1] = pack_bf16(p2, p3);
  }
}

}  // namespace tessera::cuda::tc

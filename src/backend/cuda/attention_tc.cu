// Paged causal attention on the tensor cores (FlashAttention-style), for bf16 KV caches.
// One block per (sequence, tile of query tokens, kv head, key split): its 64 query rows are the
// tile's tokens × the kv head's group of query heads, so each K/V tile read from the cache
// serves the whole group. Per 64-key tile: S = Q·Kᵀ (wmma, f32 accumulate), an online softmax
// in f32 (two lanes per row), O = O·corr + P·V (wmma). Each of the 4 warps owns 16 rows, so
// only the K/V tile loads need the whole block. Q and P are rounded to bf16 for the products.
#include <mma.h>

#include <cmath>

#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

using namespace nvcuda;
using KV = __nv_bfloat16;

constexpr int kRows = 64, kKeys = 64, kWarps = 4, kThreads = kWarps * 32;
constexpr int kSLd = kKeys + 4;  // f32 scores (wmma wants multiples of 4 for f32, 8 for 16-bit)
constexpr int kPLd = kKeys + 8;  // bf16 probabilities

template <int DH>
struct Layout {
  static constexpr int kQLd = DH + 8, kKvLd = DH + 8, kOLd = DH + 4;  // padded against bank conflicts
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(kRows) * kQLd * 2;
  static constexpr size_t v = k + size_t(kKeys) * kKvLd * 2;
  static constexpr size_t s = v + size_t(kKeys) * kKvLd * 2;
  static constexpr size_t p = s + size_t(kRows) * kSLd * 4;
  static constexpr size_t o = p + size_t(kRows) * kPLd * 2;
  static constexpr size_t rows = o + size_t(kRows) * kOLd * 4;  // m, l, corr (f32), first, last (i32)
  static constexpr size_t bytes = rows + size_t(kRows) * 5 * 4;
};

template <int DH>
__global__ void __launch_bounds__(kThreads) flash_kernel(AttentionArgs a, int q_tiles, float* partial) {
  using L = Layout<DH>;
  extern __shared__ __align__(128) unsigned char smem[];
  KV* sq = reinterpret_cast<KV*>(smem + L::q);
  KV* sk = reinterpret_cast<KV*>(smem + L::k);
  KV* sv = reinterpret_cast<KV*>(smem + L::v);
  float* ss = reinterpret_cast<float*>(smem + L::s);
  KV* sp = reinterpret_cast<KV*>(smem + L::p);
  float* so = reinterpret_cast<float*>(smem + L::o);
  float* row_m = reinterpret_cast<float*>(smem + L::rows);
  float* row_l = row_m + kRows;
  float* row_corr = row_l + kRows;
  int* row_first = reinterpret_cast<int*>(row_corr + kRows);
  int* row_last = row_first + kRows;

  const int seq = blockIdx.x / q_tiles, qt = blockIdx.x % q_tiles;
  const int kvh = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int G = int(a.H / a.Hkv), tile_tokens = kRows / G;
  const int seq_end = a.seq_starts[seq + 1], t0 = a.seq_starts[seq] + qt * tile_tokens;
  if (t0 >= seq_end) return;  // the whole block: no barrier has been reached yet
  const int ctx = a.context_lens[seq];
  const int32_t* table = a.block_tables + int64_t(seq) * a.max_blocks;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  for (int r = tid; r < kRows; r += kThreads) {
    int t = t0 + r / G, first = 0, last = -1;
    if (t < seq_end) {
      int qpos = a.positions[t];
      first = a.sliding_window > 0 ? max(0, qpos - a.sliding_window + 1) : 0;
      last = min(qpos, ctx - 1);
    }
    row_first[r] = first, row_last[r] = last, row_m[r] = -INFINITY, row_l[r] = 0.0f;
  }
  // Rows past the sequence's last token stay out of every loop below but the products, whose
  // 16-row strips they pad with zeros.
  const int last_token = min(seq_end, t0 + tile_tokens) - 1, rows = (last_token - t0 + 1) * G;
  for (int e = tid; e < kRows * DH; e += kThreads) {
    int r = e / DH, d = e % DH;
    float v = r < rows ? a.q[(int64_t(t0 + r / G) * a.H + kvh * G + r % G) * DH + d] : 0.0f;
    sq[r * L::kQLd + d] = __float2bfloat16_rn(v);
    so[r * L::kOLd + d] = 0.0f;
  }
  __syncthreads();

  // Keys the block needs: from the first token's window start to the last token's position.
  const int kmin = row_first[0], kmax = row_last[(last_token - t0) * G];
  const int tiles = kmax >= kmin ? (kmax - kmin) / kKeys + 1 : 0, per = (tiles + splits - 1) / splits;
  const int tile_begin = split * per, tile_end = min(tiles, tile_begin + per);
  const bool warp_active = t0 + (16 * warp) / G < seq_end;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  constexpr int kChunks = DH / 8;  // 16-byte pieces of a K or V row

  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int j0 = kmin + tile * kKeys;
    for (int c = tid; c < kKeys * kChunks; c += kThreads) {
      int kk = c / kChunks, ch = c % kChunks, j = j0 + kk;
      uint4 kv4 = make_uint4(0, 0, 0, 0), vv4 = make_uint4(0, 0, 0, 0);  // zeros past the keys in use
      if (j <= kmax) {
        int64_t slot = int64_t(table[j / a.block_size]) * a.block_size + j % a.block_size;
        int64_t off = (slot * a.Hkv + kvh) * DH + ch * 8;
        kv4 = __ldg(reinterpret_cast<const uint4*>(kc + off));
        vv4 = __ldg(reinterpret_cast<const uint4*>(vc + off));
      }
      *reinterpret_cast<uint4*>(sk + kk * L::kKvLd + ch * 8) = kv4;
      *reinterpret_cast<uint4*>(sv + kk * L::kKvLd + ch * 8) = vv4;
    }
    __syncthreads();
    if (warp_active) {
      const int r0 = 16 * warp;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sacc[kKeys / 16];
#pragma unroll
      for (int n = 0; n < kKeys / 16; ++n) wmma::fill_fragment(sacc[n], 0.0f);
#pragma unroll
      for (int kd = 0; kd < DH; kd += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, KV, wmma::row_major> qa;
        wmma::load_matrix_sync(qa, sq + r0 * L::kQLd + kd, L::kQLd);
#pragma unroll
        for (int n = 0; n < kKeys / 16; ++n) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, KV, wmma::col_major> kb;
          wmma::load_matrix_sync(kb, sk + n * 16 * L::kKvLd + kd, L::kKvLd);
          wmma::mma_sync(sacc[n], qa, kb, sacc[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < kKeys / 16; ++n)
        wmma::store_matrix_sync(ss + r0 * kSLd + n * 16, sacc[n], kSLd, wmma::mem_row_major);
      __syncwarp();

      // Online softmax: lanes 2i and 2i+1 share row r0 + i, 32 columns each.
      const int r = r0 + lane / 2, c0 = (lane & 1) * 32;
      const int first = row_first[r], last = row_last[r];
      float sc[32], mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        int j = j0 + c0 + c;
        float v = ss[r * kSLd + c0 + c] * a.scale;
        if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
        sc[c] = (j >= first && j <= last) ? v : -INFINITY;
        mx = fmaxf(mx, sc[c]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = row_m[r], m_new = fmaxf(m_old, mx);
      // The fast exponential (ex2.approx): the weights are rounded to bf16 right after.
      const float corr = m_new == -INFINITY ? 1.0f : __expf(m_old - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        float p = m_new == -INFINITY ? 0.0f : __expf(sc[c] - m_new);
        sum += p;
        sp[r * kPLd + c0 + c] = __float2bfloat16_rn(p);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      __syncwarp();  // both lanes of the row have read row_m
      if ((lane & 1) == 0) row_m[r] = m_new, row_l[r] = row_l[r] * corr + sum, row_corr[r] = corr;
      __syncwarp();
      if (!__all_sync(0xffffffffu, corr == 1.0f)) {  // no row's maximum moved: nothing to rescale
        for (int e = lane; e < 16 * DH; e += 32) {
          int rr = r0 + e / DH;
          so[rr * L::kOLd + e % DH] *= row_corr[rr];
        }
        __syncwarp();
      }
#pragma unroll
      for (int dn = 0; dn < DH / 16; ++dn) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> oacc;
        wmma::load_matrix_sync(oacc, so + r0 * L::kOLd + dn * 16, L::kOLd, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < kKeys; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, KV, wmma::row_major> pa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, KV, wmma::row_major> vb;
          wmma::load_matrix_sync(pa, sp + r0 * kPLd + kk, kPLd);
          wmma::load_matrix_sync(vb, sv + kk * L::kKvLd + dn * 16, L::kKvLd);
          wmma::mma_sync(oacc, pa, vb, oacc);
        }
        wmma::store_matrix_sync(so + r0 * L::kOLd + dn * 16, oacc, L::kOLd, wmma::mem_row_major);
      }
    }
    __syncthreads();  // the next tile overwrites K and V
  }

  for (int e = tid; e < rows * DH; e += kThreads) {
    int r = e / DH, d = e % DH, t = t0 + r / G;
    int64_t th = int64_t(t) * a.H + kvh * G + r % G;
    float o = so[r * L::kOLd + d];
    if (splits == 1) {
      a.out[th * DH + d] = row_l[r] > 0.0f ? o / row_l[r] : 0.0f;
    } else {
      float* p = partial + (th * splits + split) * (DH + 2);
      p[d] = o;
      if (d == 0) p[DH] = row_m[r], p[DH + 1] = row_l[r];
    }
  }
}

template <int DH>
void launch(const AttentionArgs& a, int q_tiles, int splits, float* partial, cudaStream_t s) {
  static bool configured = false;  // raising the shared-memory limit once per kernel is enough
  if (!configured) {
    check(cudaFuncSetAttribute(flash_kernel<DH>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(Layout<DH>::bytes)),
          "flash attention shared memory");
    configured = true;
  }
  dim3 grid(unsigned(a.num_seqs * q_tiles), unsigned(a.Hkv), unsigned(splits));
  flash_kernel<DH><<<grid, kThreads, Layout<DH>::bytes, s>>>(a, q_tiles, partial);
}

}  // namespace

int flash_attention_tiles(const AttentionArgs& a, int max_query_len, size_t smem_limit) {
  int64_t G = a.H / a.Hkv;
  size_t smem = a.Dh == 64 ? Layout<64>::bytes : a.Dh == 128 ? Layout<128>::bytes : a.Dh == 256 ? Layout<256>::bytes : 0;
  if (a.cache_dtype != DType::BF16 || smem == 0 || smem > smem_limit || a.H % a.Hkv != 0 || kRows % G != 0) return 0;
  int tile_tokens = int(kRows / G);
  return (max_query_len + tile_tokens - 1) / tile_tokens;
}

void flash_attention(const AttentionArgs& a, int q_tiles, int splits, float* partial, cudaStream_t s) {
  switch (a.Dh) {
    case 64: launch<64>(a, q_tiles, splits, partial, s); break;
    case 128: launch<128>(a, q_tiles, splits, partial, s); break;
    case 256: launch<256>(a, q_tiles, splits, partial, s); break;
    default: throw Error("flash attention: unsupported head_dim " + std::to_string(a.Dh));
  }
  check_launch("flash attention");
  if (splits > 1) combine_partials(partial, a.T * a.H, splits, a.Dh, a.out, s);
}

}  // namespace tessera::cuda

// Paged causal attention on the tensor cores (FlashAttention-2 style), for bf16 KV caches.
// One block per (sequence, tile of query tokens, kv head, key split): its 64 query rows are the
// tile's tokens × the kv head's group of query heads, so each K/V tile read from the cache
// serves the whole group. Each of the 4 warps owns 16 rows and keeps everything of them in
// registers: S = Q·Kᵀ and O += P·V run as mma.sync m16n8k16 (bf16 in, f32 accumulate), the
// online softmax works on the S accumulators, and P goes from the S accumulator layout straight
// into the A operand of P·V. K/V tiles of 64 keys are gathered from the paged cache with
// cp.async into a double buffer, so the next tile's loads overlap this tile's products.
// Q and P are rounded to bf16 for the products.
#include <string>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

using namespace tc;

template <int DH>
struct Layout {
  static constexpr int kLd = DH + 8;  // bf16 row stride: 16 bytes of padding keep ldmatrix conflict-free
  static constexpr size_t tile = size_t(kKeys) * kLd * 2;
  static constexpr size_t q = 0;
  static constexpr size_t kv = q + size_t(kRows) * kLd * 2;  // [2 buffers][K, V] tiles
  static constexpr size_t bytes = kv + 4 * tile;
};

template <int DH>
__global__ void __launch_bounds__(kThreads) flash_kernel(AttentionArgs a, int q_tiles, float* partial) {
  using L = Layout<DH>;
  constexpr int kLd = L::kLd;
  extern __shared__ __align__(128) unsigned char smem[];
  const StagedTiles<L> staged{smem};

  // The heaviest (last) query tiles of each sequence are launched first.
  const int seq = blockIdx.x / q_tiles, qt = q_tiles - 1 - int(blockIdx.x % q_tiles);
  const int kvh = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int G = int(a.H / a.Hkv), tile_tokens = kRows / G;
  const int seq_end = a.seq_starts[seq + 1], t0 = a.seq_starts[seq] + qt * tile_tokens;
  if (t0 >= seq_end) return;  // the whole block: no barrier has been reached yet
  const int ctx = a.context_lens[seq];
  const int32_t* table = a.block_tables + int64_t(seq) * a.max_blocks;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int last_token = min(seq_end, t0 + tile_tokens) - 1, rows = (last_token - t0 + 1) * G;

  // Key range of a row: [first, last]; rows past the sequence's tokens get an empty one.
  auto key_range = [&](int r, int& first, int& last) {
    first = 0, last = -1;
    if (r < rows) {
      int qpos = a.positions[t0 + r / G];
      first = a.sliding_window > 0 ? max(0, qpos - a.sliding_window + 1) : 0;
      last = min(qpos, ctx - 1);
    }
  };
  // Keys the block needs: from the first row's window start to the last row's position.
  int kmin, kmax, unused;
  key_range(0, kmin, unused);
  key_range(rows - 1, unused, kmax);
  const int tiles = kmax >= kmin ? (kmax - kmin) / kKeys + 1 : 0, per = (tiles + splits - 1) / splits;
  const int tile_begin = split * per, tile_end = min(tiles, tile_begin + per);
  auto load_tile = [&](int tile, int buf) {
    load_kv_tile<DH, kLd>(a, table, kvh, kmin + tile * kKeys, kmax, staged.k(buf), staged.v(buf));
  };
  if (tile_begin < tile_end) load_tile(tile_begin, 0);

  for (int e = tid; e < kRows * DH; e += kThreads) {
    int r = e / DH, d = e % DH;
    float v = r < rows ? a.q[(int64_t(t0 + r / G) * a.H + kvh * G + r % G) * DH + d] : 0.0f;
    staged.q()[r * kLd + d] = __float2bfloat16_rn(v);
  }

  // This thread's two rows (lane / 4 and lane / 4 + 8 of the warp's 16) and their state.
  const int r0 = 16 * warp, ra = r0 + lane / 4, rb = ra + 8;
  int first[2], last[2];
  key_range(ra, first[0], last[0]);
  key_range(rb, first[1], last[1]);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[DH / 8][4];
#pragma unroll
  for (int n = 0; n < DH / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const bool warp_active = r0 < rows;

  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int buf = tile_ready(tile, tile_begin, tile_end, load_tile);  // (and, the first time, Q)
    if (warp_active) {
      const KV* k_tile = staged.k(buf);
      const KV* v_tile = staged.v(buf);
      float s[kKeys / 8][4];
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      // ldmatrix: lane l addresses row l % 8 of 8×8 matrix l / 8.
      const int mi = lane / 8, mr = lane % 8;
#pragma unroll
      for (int kd = 0; kd < DH; kd += 16) {
        unsigned qa[4];
        ldmatrix_x4(qa, staged.q() + (r0 + mr + (mi & 1) * 8) * kLd + kd + (mi >> 1) * 8);
#pragma unroll
        for (int np = 0; np < kKeys / 16; ++np) {
          unsigned kb[4];
          ldmatrix_x4(kb, k_tile + (np * 16 + mr + (mi >> 1) * 8) * kLd + kd + (mi & 1) * 8);
          mma(s[2 * np], qa, kb[0], kb[1]);
          mma(s[2 * np + 1], qa, kb[2], kb[3]);
        }
      }

      unsigned pa[kKeys / 16][4];
      softmax_step<kKeys / 8, DH>(a, s, kmin + tile * kKeys + 2 * (lane % 4), first, last, m, l, o, pa);
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
#pragma unroll
        for (int dp = 0; dp < DH / 16; ++dp) {
          unsigned vb[4];
          ldmatrix_x4_trans(vb, v_tile + (kk * 16 + mr + (mi & 1) * 8) * kLd + dp * 16 + (mi >> 1) * 8);
          mma(o[2 * dp], pa[kk], vb[0], vb[1]);
          mma(o[2 * dp + 1], pa[kk], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
  if (!warp_active) return;

  // Row sums over the 4 lanes of a row, then this thread's columns of its two rows.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = h == 0 ? ra : rb;
    if (r >= rows) continue;
    const int64_t th = int64_t(t0 + r / G) * a.H + kvh * G + r % G;
    const int c = 2 * (lane % 4);
    if (splits == 1) {
      const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
#pragma unroll
      for (int n = 0; n < DH / 8; ++n)
        store2_as(a.out, a.out_dtype, th * DH + 8 * n + c, o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    } else {
      float* p = partial + (th * splits + split) * (DH + 2);
#pragma unroll
      for (int n = 0; n < DH / 8; ++n) p[8 * n + c] = o[n][2 * h], p[8 * n + c + 1] = o[n][2 * h + 1];
      if (lane % 4 == 0) p[DH] = l[h] > 0.0f ? m[h] * kLn2 : -INFINITY, p[DH + 1] = l[h];
    }
  }
}

template <int DH>
void launch(const AttentionArgs& a, int q_tiles, int splits, float* partial, cudaStream_t s) {
  allow_shared_memory<flash_kernel<DH>>(Layout<DH>::bytes, "flash attention shared memory");
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
  if (splits > 1) combine_partials(partial, a.T * a.H, splits, a.Dh, a.out, a.out_dtype, s);
}

}  // namespace tessera::cuda

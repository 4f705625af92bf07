// Decode steps (one new token a sequence) on the tensor cores, for bf16 KV caches: one block per
// (sequence, kv head, key split) of 4 warps, each warp taking 16 keys of every 64-key tile. Two
// forms: the group's heads as the rows of one mma tile over tiles staged in shared memory (any
// group of up to 16 heads, head_dim up to 256), and, for head_dim 64-128 and groups of up to 8,
// each warp reading its keys straight into registers; on small grids the latter's key splits
// merge in a thread-block cluster (blocks of 8 warps) instead of through combine_partials.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/cluster_merge.cuh"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

using namespace tc;

// The shared-memory form: the group's G query heads are the rows of one 16-row mma tile, so its
// Q fragments stay in registers; the block loads 64-key tiles as the prefill kernel does
// (load_kv_tile) and each warp takes 16 keys of every tile, keeping its own running max, sum
// and accumulator (four times the prefill kernel's parallelism for one row tile). The warps
// merge through shared memory at the end.
template <int DH>
struct DecodeLayout {
  static constexpr int kLd = DH + 8;
  static constexpr size_t tile = size_t(kKeys) * kLd * 2;
  static constexpr size_t q = 0;
  static constexpr size_t kv = q + size_t(16) * kLd * 2;  // [2 buffers][K, V] tiles, then the warps' merge
  static constexpr size_t merge = size_t(kWarps) * 16 * (DH + 2) * 4;
  static constexpr size_t bytes = kv + (4 * tile > merge ? 4 * tile : merge);
};

// A decode block's share of the work: sequence blockIdx.x's new token t (at position qpos), its
// keys [first, last] cut into tiles of kKeys, and the tiles [tile_begin, tile_end) of key split
// blockIdx.z. False for a sequence with no new token this step.
struct DecodeWork {
  int t, qpos, first, last, tile_begin, tile_end;
};
__device__ __forceinline__ bool decode_work(const AttentionArgs& a, DecodeWork& w) {
  const int seq = blockIdx.x, splits = gridDim.z;
  w.t = a.seq_starts[seq];
  if (a.seq_starts[seq + 1] <= w.t) return false;
  w.qpos = a.positions[w.t];
  w.first = a.sliding_window > 0 ? max(0, w.qpos - a.sliding_window + 1) : 0;
  w.last = min(w.qpos, a.context_lens[seq] - 1);
  const int tiles = w.last >= w.first ? (w.last - w.first) / kKeys + 1 : 0, per = (tiles + splits - 1) / splits;
  w.tile_begin = int(blockIdx.z) * per, w.tile_end = min(tiles, w.tile_begin + per);
  return true;
}

// The end of a decode block: its warps' partial results for the group's heads, in shared memory
// (head r of warp w at merge + (w * rows + r) * (DH + 2): the unnormalised output, then the max
// and sum in log2 units), merged into the output, into this key split's partial result, or (for
// merge_in_cluster) into block_sums, head r at r * (DH + 2) in the partial result's form.
template <int DH, int kW = kWarps>
__device__ __forceinline__ void merge_warps(const AttentionArgs& a, const float* merge, int rows, int t, int kvh,
                                            int split, float* partial, float* block_sums = nullptr) {
  const int G = int(a.H / a.Hkv), splits = gridDim.z;
  auto slot = [&](int w, int r) { return merge + (w * rows + r) * (DH + 2); };
  for (int e = threadIdx.x; e < G * DH; e += kW * 32) {
    const int r = e / DH, d = e % DH;
    float mx = -INFINITY;
    for (int w = 0; w < kW; ++w) mx = fmaxf(mx, slot(w, r)[DH]);
    float sum = 0.0f, acc = 0.0f;
    for (int w = 0; w < kW; ++w) {
      const float* p = slot(w, r);
      if (p[DH] == -INFINITY) continue;  // a warp that saw no keys
      const float f = fast_exp2(p[DH] - mx);
      sum += p[DH + 1] * f;
      acc += p[d] * f;
    }
    const int64_t th = int64_t(t) * a.H + kvh * G + r;
    if (block_sums) {
      float* bs = block_sums + r * (DH + 2);
      bs[d] = acc;
      if (d == 0) bs[DH] = sum > 0.0f ? mx * kLn2 : -INFINITY, bs[DH + 1] = sum;
    } else if (splits == 1) {
      store_as(a.out, a.out_dtype, th * DH + d, sum > 0.0f ? acc / sum : 0.0f);
    } else {
      float* pp = partial + (th * splits + split) * (DH + 2);
      pp[d] = acc;
      if (d == 0) pp[DH] = sum > 0.0f ? mx * kLn2 : -INFINITY, pp[DH + 1] = sum;
    }
  }
}

template <int DH>
__global__ void __launch_bounds__(kThreads) flash_decode_kernel(AttentionArgs a, float* partial) {
  using L = DecodeLayout<DH>;
  constexpr int kLd = L::kLd;
  extern __shared__ __align__(128) unsigned char smem[];
  const StagedTiles<L> staged{smem};

  allow_next();
  // The step's inputs and the keys before this token's were written before the step: read while
  // the previous kernel (which stores this token's key and value, and q) still runs.
  DecodeWork w;
  if (!decode_work(a, w)) return;  // no new token: the whole block leaves
  const int seq = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, G = int(a.H / a.Hkv);
  const int t = w.t, qpos = w.qpos, first = w.first, last = w.last;
  const int tile_begin = w.tile_begin, tile_end = w.tile_end;
  const int32_t* table = a.block_tables + int64_t(seq) * a.max_blocks;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  auto load_tile = [&](int tile, int buf) {
    load_kv_tile<DH, kLd>(a, table, kvh, first + tile * kKeys, last, staged.k(buf), staged.v(buf));
  };
  // The first tile before the previous kernel ends, unless it holds this token's key.
  const bool early = tile_begin < tile_end && first + (tile_begin + 1) * kKeys <= qpos;
  if (early) load_tile(tile_begin, 0);
  wait_for_previous();
  if (!early && tile_begin < tile_end) load_tile(tile_begin, 0);

  for (int e = tid; e < 16 * DH; e += kThreads) {
    int r = e / DH, d = e % DH;
    float v = r < G ? a.q[(int64_t(t) * a.H + kvh * G + r) * DH + d] : 0.0f;
    staged.q()[r * kLd + d] = __float2bfloat16_rn(v);
  }
  __syncthreads();
  // ldmatrix: lane l addresses row l % 8 of 8×8 matrix l / 8.
  const int mi = lane / 8, mr = lane % 8;
  unsigned qa[DH / 16][4];
#pragma unroll
  for (int kd = 0; kd < DH / 16; ++kd)
    ldmatrix_x4(qa[kd], staged.q() + (mr + (mi & 1) * 8) * kLd + kd * 16 + (mi >> 1) * 8);

  // This thread's rows: heads lane / 4 and lane / 4 + 8 of the group (those below G are real).
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[DH / 8][4];
#pragma unroll
  for (int n = 0; n < DH / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const int k0 = 16 * warp;  // this warp's keys in each tile
  const int key_first[2] = {first, first}, key_last[2] = {last, last};  // one token: every row's range

  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int buf = tile_ready(tile, tile_begin, tile_end, load_tile);
    const KV* k_tile = staged.k(buf);
    const KV* v_tile = staged.v(buf);
    float s[2][4] = {};
#pragma unroll
    for (int kd = 0; kd < DH / 16; ++kd) {
      unsigned kb[4];
      ldmatrix_x4(kb, k_tile + (k0 + mr + (mi >> 1) * 8) * kLd + kd * 16 + (mi & 1) * 8);
      mma(s[0], qa[kd], kb[0], kb[1]);
      mma(s[1], qa[kd], kb[2], kb[3]);
    }
    unsigned pa[1][4];
    softmax_step<2, DH>(a, s, first + tile * kKeys + k0 + 2 * (lane % 4), key_first, key_last, m, l, o, pa);
#pragma unroll
    for (int dp = 0; dp < DH / 16; ++dp) {
      unsigned vb[4];
      ldmatrix_x4_trans(vb, v_tile + (k0 + mr + (mi & 1) * 8) * kLd + dp * 16 + (mi >> 1) * 8);
      mma(o[2 * dp], pa[0], vb[0], vb[1]);
      mma(o[2 * dp + 1], pa[0], vb[2], vb[3]);
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }

  // Each warp's rows (max and sum in log2 units, unnormalised output) into shared memory.
  float* merge = reinterpret_cast<float*>(smem + L::kv);
  auto slot = [&](int w, int r) { return merge + (w * 16 + r) * (DH + 2); };
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int r = lane / 4 + 8 * h;
    if (r >= G) continue;
    float* p = slot(warp, r);
    const int c = 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < DH / 8; ++n) p[8 * n + c] = o[n][2 * h], p[8 * n + c + 1] = o[n][2 * h + 1];
    if (lane % 4 == 0) p[DH] = m[h], p[DH + 1] = l[h];
  }
  __syncthreads();
  merge_warps<DH>(a, merge, 16, t, kvh, split, partial);
}

// Decode from registers (head_dim 64 or 128, up to 8 query heads per kv head): the blocks and
// key tiles of flash_decode_kernel, but each warp reads its 16 keys of a tile straight into mma
// fragments: no shared-memory staging, no barrier until the end. The products are transposed so
// that the keys, and O's head dims, are the m16 side and the group's heads the n8 side:
// S^T = K Q^T, O^T += V^T P^T. A dot product does not depend on the order of its terms, so a
// thread's k slots of S^T are whole 16-byte pieces of its two keys' rows (4 threads a key), and
// its m slots of O^T 8 consecutive dims (8 threads a V row), whose pairs of keys it packs into A
// fragments with byte permutes. P goes from the S^T accumulators (a key per thread row) to P^T's
// B fragments (keys per thread column) through four shuffles.
// kCluster: the key splits (gridDim.z, 2-8) form a cluster and merge there (merge_in_cluster); its
// blocks have 8 warps, so a split of up to 128 keys takes one step.
// kMinBlocks: the blocks an SM must hold (4: the dense form of dense_wave, at most 128 registers).
// kAhead: the steps of keys a warp holds in registers, the ones it computes on and those in
// flight (2: the deep form, for grids of at most two blocks an SM, where a warp's loads are all
// that keep the SM's memory requests going).
template <bool kCluster>
constexpr int kRegWarps = kCluster ? 8 : kWarps;
template <int DH, bool kCluster, int kMinBlocks = 1, int kAhead = 1>
__global__ void __launch_bounds__(kRegWarps<kCluster> * 32, kMinBlocks)
    flash_decode_reg_kernel(AttentionArgs a, float* partial) {
  constexpr int kW = kRegWarps<kCluster>;
  constexpr int kKP = DH / 32;  // 16-byte pieces a thread reads of each of its 2 K rows
  constexpr int kVP = DH / 64;  // ... of each of its 4 V rows
  constexpr int kMB = DH / 16;  // k steps of S^T, m blocks of O^T
  constexpr int kStride = 16 * kW;  // keys between a warp's steps
  __shared__ __align__(16) float merge_smem[kW * 8 * (DH + 2)];

  allow_next();
  // The step's inputs and the keys before this token's were written before the step: read while
  // the previous kernel (which stores this token's key and value, and q) still runs.
  DecodeWork w;
  if (!decode_work(a, w)) return;  // no new token: the whole block leaves
  const int seq = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, G = int(a.H / a.Hkv);
  const int t = w.t, qpos = w.qpos, first = w.first, last = w.last;
  const int begin = first + w.tile_begin * kKeys, end = min(last + 1, first + w.tile_end * kKeys);
  const int32_t* table = a.block_tables + int64_t(seq) * a.max_blocks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  // This thread's first bytes of kv head kvh in cache row 0, and a row's bytes (a slot's
  // address is one wide multiply-add from them).
  const char* kc = static_cast<const char*>(a.k_cache) + (int64_t(kvh) * DH + 8 * c) * int64_t(sizeof(KV));
  const char* vc = static_cast<const char*>(a.v_cache) + (int64_t(kvh) * DH + 8 * g) * int64_t(sizeof(KV));
  const unsigned row = unsigned(a.Hkv * DH * int64_t(sizeof(KV)));
  auto at = [row](const char* p, int slot, int offset) {
    return __ldg(reinterpret_cast<const uint4*>(p + uint64_t(unsigned(slot)) * row + offset));
  };

  // The cache slot of key base + lane % 16 (of the last key, for those past the end).
  auto lookup = [&](int base) {
    const int j = min(base + (lane & 15), end - 1), p = j / a.block_size;
    return table[p] * a.block_size + (j - p * a.block_size);
  };
  // K rows of keys base + g and + g + 8: pieces 4i + c. V rows of keys base + c, + c + 8, + c + 4,
  // + c + 12 (P^T's k slots 2c, 2c + 1, 2c + 8, 2c + 9): dims 64i + 8g .. + 7.
  // Buffer b of the ring holds the keys of every kAhead-th step.
  uint4 kf[kAhead][2][kKP], vf[kAhead][4][kVP];
  auto load_k = [&](uint4 (&k)[2][kKP], int slots) {
    const int s0 = __shfl_sync(0xffffffffu, slots, g), s1 = __shfl_sync(0xffffffffu, slots, g + 8);
#pragma unroll
    for (int i = 0; i < kKP; ++i) k[0][i] = at(kc, s0, 64 * i), k[1][i] = at(kc, s1, 64 * i);
  };
  auto load_v = [&](uint4 (&v)[4][kVP], int slots) {
    const int s[4] = {__shfl_sync(0xffffffffu, slots, c), __shfl_sync(0xffffffffu, slots, c + 8),
                      __shfl_sync(0xffffffffu, slots, c + 4), __shfl_sync(0xffffffffu, slots, c + 12)};
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int i = 0; i < kVP; ++i) v[u][i] = at(vc, s[u], 128 * i);
  };

  // The first steps' keys before the previous kernel ends, unless they hold this token's.
  int base = begin + 16 * warp;
  int first_slots[kAhead];
  bool early[kAhead];
#pragma unroll
  for (int b = 0; b < kAhead; ++b) {
    const int at_b = base + b * kStride;
    early[b] = at_b < end && min(at_b + 15, end - 1) < qpos;
    first_slots[b] = at_b < end ? lookup(at_b) : 0;
    if (early[b]) load_k(kf[b], first_slots[b]), load_v(vf[b], first_slots[b]);
  }
  wait_for_previous();
#pragma unroll
  for (int b = 0; b < kAhead; ++b)
    if (!early[b] && base + b * kStride < end) load_k(kf[b], first_slots[b]), load_v(vf[b], first_slots[b]);
  int next_slots = base + kAhead * kStride < end ? lookup(base + kAhead * kStride) : 0;

  // Q^T as B fragments: head g's pieces 4i + c (zero past the group), K's k slots.
  uint4 qb[kKP];
#pragma unroll
  for (int i = 0; i < kKP; ++i) {
    float f[8] = {};
    if (g < G) load8(a.q + (int64_t(t) * a.H + kvh * G + g) * DH + (4 * i + c) * 8, f);
    qb[i] = make_uint4(pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]), pack_bf16(f[6], f[7]));
  }

  // This thread's heads 2c and 2c + 1: running max and sum (log2 units) and O^T columns.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kMB][4];
#pragma unroll
  for (int n = 0; n < kMB; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const float qk_scale = a.scale * kLog2e;

  // One step on the keys of buffer b, which then takes those kAhead steps on.
  auto step = [&](uint4 (&kb_)[2][kKP], uint4 (&vb_)[4][kVP]) {
    const bool more = base + kAhead * kStride < end;
    const int after = base + (kAhead + 1) * kStride, after_slots = after < end ? lookup(after) : 0;

    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // keys g, g + 8 (rows) x heads 2c, 2c + 1 (columns)
#pragma unroll
    for (int i = 0; i < kKP; ++i) {
      const uint4 &k0 = kb_[0][i], &k1 = kb_[1][i];
      const unsigned ka[4] = {k0.x, k1.x, k0.y, k1.y}, kb[4] = {k0.z, k1.z, k0.w, k1.w};
      mma(s, ka, qb[i].x, qb[i].y);
      mma(s, kb, qb[i].z, qb[i].w);
    }
    if (more) load_k(kb_, next_slots);

    // Online softmax over the step's 16 keys, per head (the 8 lanes of one c share its heads).
    if (a.softcap > 0.0f) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[e] = a.softcap * tanhf(s[e] * a.scale / a.softcap) * kLog2e;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[e] *= qk_scale;
    }
    if (base + 15 >= end) {  // the last step: keys past the end weigh nothing
#pragma unroll
      for (int e = 0; e < 4; ++e) s[e] = base + g + (e >= 2 ? 8 : 0) < end ? s[e] : -INFINITY;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = fmaxf(s[h], s[h + 2]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float m_new = fmaxf(m[h], mx);  // finite: a step's first key is always in range
      const float corr = fast_exp2(m[h] - m_new);
      m[h] = m_new;
      s[h] = fast_exp2(s[h] - m_new), s[h + 2] = fast_exp2(s[h + 2] - m_new);
      l[h] = l[h] * corr + s[h] + s[h + 2];
#pragma unroll
      for (int n = 0; n < kMB; ++n) o[n][h] *= corr, o[n][h + 2] *= corr;
    }
    // P^T's B fragments of head g: keys c, c + 8 from lane 4c + g / 2, keys c + 4, c + 12 from
    // lane 4c + 16 + g / 2 (their S^T rows), the head's parity picking the column.
    const unsigned p0 = pack_bf16(s[0], s[2]), p1 = pack_bf16(s[1], s[3]);
    const int src = 4 * c + g / 2;
    const unsigned x0 = __shfl_sync(0xffffffffu, p0, src), x1 = __shfl_sync(0xffffffffu, p1, src);
    const unsigned y0 = __shfl_sync(0xffffffffu, p0, src + 16), y1 = __shfl_sync(0xffffffffu, p1, src + 16);
    const unsigned pb0 = g % 2 ? x1 : x0, pb1 = g % 2 ? y1 : y0;
#pragma unroll
    for (int n = 0; n < kMB; ++n) {
      const int i = n / 4, r = n % 4;  // dims 64i + 8g + 2r (m slot g) and + 1 (m slot g + 8)
      const unsigned wa = (&vb_[0][i].x)[r], wb = (&vb_[1][i].x)[r], wc = (&vb_[2][i].x)[r], wd = (&vb_[3][i].x)[r];
      const unsigned va[4] = {__byte_perm(wa, wb, 0x5410), __byte_perm(wa, wb, 0x7632), __byte_perm(wc, wd, 0x5410),
                              __byte_perm(wc, wd, 0x7632)};
      mma(o[n], va, pb0, pb1);
    }
    if (more) load_v(vb_, next_slots);
    next_slots = after_slots;
    base += kStride;
  };
  while (base < end) {
#pragma unroll
    for (int b = 0; b < kAhead; ++b)
      if (base < end) step(kf[b], vf[b]);
  }

  // Each warp's heads (unnormalised output, max and sum in log2 units) into shared memory.
  float* merge = reinterpret_cast<float*>(merge_smem);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 4);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 8);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 16);
    const int head = 2 * c + h;
    if (head >= G) continue;
    float* p = merge + (warp * 8 + head) * (DH + 2);
#pragma unroll
    for (int n = 0; n < kMB; ++n)
      *reinterpret_cast<float2*>(p + 64 * (n / 4) + 8 * g + 2 * (n % 4)) = make_float2(o[n][h], o[n][h + 2]);
    if (g == 0) p[DH] = m[h], p[DH + 1] = l[h];
  }
  __syncthreads();
  if constexpr (kCluster) {
    __shared__ float sums[8 * (DH + 2)];  // the block's merged heads, for the cluster
    merge_warps<DH, kW>(a, merge, 8, t, kvh, split, partial, sums);
    merge_in_cluster(a, t, kvh, sums + DH, DH + 2, sums, DH + 2);
  } else {
    merge_warps<DH, kW>(a, merge, 8, t, kvh, split, partial);
  }
}

template <int DH>
void configure_decode() {
  allow_shared_memory<flash_decode_kernel<DH>>(DecodeLayout<DH>::bytes, "flash decode shared memory");
}

// Whether the register form serves these shapes (head_dim 64 or 128, at most 8 heads a group).
// Against the shared-memory form on the H200 (8B shapes, bench_cuda decode tok/s, three rounds):
// batch 32 / 64 / 256 at context 512 5,588-5,649 / 9,362-9,414 / 18,188-18,305 against
// 5,465-5,533 / 9,191-9,225 / 17,747-17,925, context 4096 batch 64 4,698-4,709 against
// 4,451-4,477; the kernel at batch 64 executes 7.7 M instructions instead of 14.7 M.
inline bool decode_in_registers(const AttentionArgs& a) { return a.Dh <= 128 && a.H / a.Hkv <= 8; }

constexpr int kDenseBlocks = 4;

// Blocks of kThreads an SM for one of the decode kernels with `smem` bytes of shared memory.
template <class Kernel>
int blocks_per_sm(Kernel kernel, size_t smem) {
  int n = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem), "flash decode occupancy");
  return std::max(n, 1);
}

template <int DH>
int shared_blocks_per_sm() {
  configure_decode<DH>();
  return blocks_per_sm(flash_decode_kernel<DH>, DecodeLayout<DH>::bytes);
}

// The register form's blocks an SM (head_dim 64 or 128), as compiled and in the dense form.
struct RegOccupancy {
  int plain, dense;
};
template <int DH>
RegOccupancy reg_occupancy_of() {
  return {blocks_per_sm(flash_decode_reg_kernel<DH, false>, 0),
          blocks_per_sm(flash_decode_reg_kernel<DH, false, kDenseBlocks>, 0)};
}
RegOccupancy reg_occupancy(int Dh) {
  static const RegOccupancy d64 = reg_occupancy_of<64>(), d128 = reg_occupancy_of<128>();
  return Dh == 64 ? d64 : d128;
}

// Whether the register form runs in its deep form (two steps of keys a warp in registers): where
// one key split a (sequence, kv head) leaves at most two blocks an SM, so that the SM's requests
// in flight are those of its 8 warps (an 8B's 256 blocks at batch 32 on the H200's 132 SMs).
// Measured there (bench_cuda, context 512, two rounds, deep / one step ahead): batch 32 6,921 and
// 6,927 / 6,865 and 6,867 tok/s, the attention alone 20.1-20.3 / 24.2-24.3 µs a layer. 223
// registers a thread: two blocks an SM. TESSERA_CUDA_DECODE_DEEP=0 turns it off, for
// side-by-side measurements.
bool deep_wave(const AttentionArgs& a, int sm_count) {
  static const bool enabled = !switched_off("TESSERA_CUDA_DECODE_DEEP");
  if (!enabled || !decode_in_registers(a)) return false;
  static const int per_sm[2] = {blocks_per_sm(flash_decode_reg_kernel<64, false, 1, 2>, 0),
                                blocks_per_sm(flash_decode_reg_kernel<128, false, 1, 2>, 0)};
  return int64_t(a.num_seqs) * a.Hkv <= int64_t(sm_count) * std::min(per_sm[a.Dh == 64 ? 0 : 1], 2);
}

// Whether the register form runs in its dense form (4 blocks an SM for 3 as compiled, the price
// 48 bytes of spilled registers at head_dim 128), each (sequence, kv head) in one block with no
// key split: where those blocks fit one dense wave but not one plain wave (an 8B's 512 blocks at
// batch 64 on the H200's 132 SMs: 528 slots against 396) and the context is short enough that
// the plain form's splits and their combine pass cost more than the spills. Measured on the H200
// (8B shapes, bench_cuda batch 64, two rounds, plain / dense): context 512 9,554, 9,600 / 9,825,
// 9,877 tok/s (attention 45.5 -> 37.2 µs a layer); 1024 8,356, 8,291 / 8,548, 8,554; 2048 (33
// tiles) 6,598, 6,621 / 6,705, 6,703; 4096 (65 tiles) 4,742, 4,748 / 4,694, 4,700, hence the
// bound between. With the dense form's occupancy in the wave rule everywhere, batch 32 (its
// splits) and 128 ran 1-3% slower.
constexpr int kDenseMaxTiles = 48;
bool dense_wave(const AttentionArgs& a, int sm_count) {
  if (!decode_in_registers(a)) return false;
  const RegOccupancy occ = reg_occupancy(int(a.Dh));
  const int64_t blocks = int64_t(a.num_seqs) * a.Hkv;
  const int tiles = (a.max_context_len + kKeys - 1) / kKeys;
  return occ.dense > occ.plain && blocks > int64_t(sm_count) * occ.plain && blocks <= int64_t(sm_count) * occ.dense &&
         tiles <= kDenseMaxTiles;
}

template <int DH>
void launch_decode(const AttentionArgs& a, int splits, bool clustered, float* partial, int sm_count, cudaStream_t s) {
  dim3 grid(unsigned(a.num_seqs), unsigned(a.Hkv), unsigned(splits));
  if constexpr (DH <= 128) {
    if (clustered) {
      launch_in_clusters(flash_decode_reg_kernel<DH, true>, grid, dim3(1, 1, unsigned(splits)),
                         dim3(kRegWarps<true> * 32), 0, s, a, partial);
      return;
    }
    if (decode_in_registers(a)) {
      if (splits == 1 && dense_wave(a, sm_count))
        launch_dependent(flash_decode_reg_kernel<DH, false, kDenseBlocks>, grid, dim3(kThreads), 0, s, a, partial);
      else if (splits == 1 && deep_wave(a, sm_count))
        launch_dependent(flash_decode_reg_kernel<DH, false, 1, 2>, grid, dim3(kThreads), 0, s, a, partial);
      else
        launch_dependent(flash_decode_reg_kernel<DH, false>, grid, dim3(kThreads), 0, s, a, partial);
      return;
    }
  }
  configure_decode<DH>();
  launch_dependent(flash_decode_kernel<DH>, grid, dim3(kThreads), DecodeLayout<DH>::bytes, s, a, partial);
}

}  // namespace

bool flash_decode_applies(const AttentionArgs& a, int max_query_len, size_t smem_limit) {
  size_t smem = a.Dh == 64    ? DecodeLayout<64>::bytes
                : a.Dh == 128 ? DecodeLayout<128>::bytes
                : a.Dh == 256 ? DecodeLayout<256>::bytes
                              : 0;
  return max_query_len == 1 && a.cache_dtype == DType::BF16 && smem > 0 && smem <= smem_limit && a.H % a.Hkv == 0 &&
         a.H / a.Hkv <= 16;
}

int flash_decode_splits(const AttentionArgs& a, int sm_count) {
  if (dense_wave(a, sm_count)) return 1;
  // The shared-memory form's blocks an SM by head_dim (64, 128, 256); the register form's.
  static const int shared_per_sm[3] = {shared_blocks_per_sm<64>(), shared_blocks_per_sm<128>(),
                                       shared_blocks_per_sm<256>()};
  const int per_sm =
      decode_in_registers(a) ? reg_occupancy(int(a.Dh)).plain : shared_per_sm[a.Dh == 64 ? 0 : a.Dh == 128 ? 1 : 2];
  const int64_t slots = int64_t(sm_count) * per_sm;
  const int64_t blocks = int64_t(a.num_seqs) * a.Hkv;
  const int tiles = std::max(1, (a.max_context_len + kKeys - 1) / kKeys);
  // Each wave of blocks takes as long as one block: its tiles plus about one tile's worth of
  // start (Q, the first load's latency) and merge; splitting adds the combine pass, about two.
  // Measured on the H200 (8B shapes): this picks the fastest of 1-4 splits at batch 32, 64 and
  // 128 for contexts 512 and 4096 (e.g. 3 splits at batch 64, context 4096: 4,356 tok/s
  // against 3,574 with 1 and 4,130 with 2). One split in the deep form (deep_wave) is costed at
  // 3/4 of that: batch 32's attention at context 512 took 20.1 against 24.2 µs a layer, and
  // bench_cuda batch 32 ran one deep split faster than the 3 splits the plain cost chose at
  // context 768 / 1024 / 1536 / 2048: 6,556-6,561 / 6,247-6,254 / 5,584 / 5,126 tok/s against
  // 6,307-6,313 / 6,024-6,026 / 5,418 / 5,022. From ~2,850 keys (and at 4096) 3 splits stay.
  const bool deep = deep_wave(a, sm_count);
  int best = 1;
  int64_t best_cost = INT64_MAX;
  for (int s = 1; s <= std::min(tiles, 32); ++s) {
    const int64_t waves = (blocks * s + slots - 1) / slots;
    const int64_t cost = (s == 1 && deep ? 3 : 4) * (waves * ((tiles + s - 1) / s + 1) + (s > 1 ? 2 : 0));
    if (cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

int flash_decode_cluster_splits(const AttentionArgs& a) {
  // Measured on the H200 (8B shapes, decode tok/s, against the CUDA-core decode kernel with its
  // own cluster merge or combine): batch 1 / 2 / 4 at context 512 236 / 402 / 886 against 225 /
  // 385 / 845, batch 1 / 4 at 1000 233 / 870 against 222 / 824, batch 1 / 2 at 2048 227 / 387
  // against 210 / 339, batch 1 at 4096 216 against 205, batch 1 / 4 at 8192 217 / 635 against
  // 193 / 538, batch 1 / 2 at 32768 170 / 228 against 134 / 172.
  // Splits of 128 keys: one step of a clustered block's 8 warps (16 keys each), where splits of
  // one 64-key tile left half of every block's warps idle. Measured on two H100s (8B shapes,
  // bench_cuda decode tok/s at batch 1 / 2 / 4, two rounds, 64-key splits against 128): context
  // 512 182.4 / 330.2-330.6 / 636.7-637.5 against 182.8 / 338.7 / 645.9, 768 186.7-187.3 /
  // 336.4-337.1 / 640.9-643.2 against 186.9-187.4 / 346.2-346.7 / 656.5-656.9, 100 (now one
  // plain split) 183.3 / 340.3 / 670.0 against 183.9-184.0 / 341.8-341.9 / 675.2; context 200
  // 188.3 / 349.3-349.6 / 667.6-674.2 against 187.5-187.6 / 347.8-348.2 / 670.9-683.7.
  // At most as many splits as make about 64 blocks in all: at batch 2-7 the cluster merges
  // cost more than the further splits gain. On an H100 (bench_cuda decode tok/s, two rounds,
  // this rule against splits by keys alone), batch 2 / 4 / 5 / 6 / 7 at context 512 348.0-348.7 /
  // 678.0-679.5 / 839.5-840.0 / 1002.2-1003.6 / 1160.4-1162.2 against 346.7-347.4 / 657.9-660.1 /
  // 819.4-820.9 / 979.4-980.6 / 1136.3-1137.9, at 2048 335.1-335.9 / 630.7 / 776.8-785.5 /
  // 923.8-931.8 / 1063.6-1073.6 against 327.4-328.5 / 605.9-614.5 / 746.4-757.6 / 858.3-873.3 /
  // 993.3-1006.3; batch 1 (the same splits either way) unchanged.
  if (!decode_in_registers(a) || !dependent_launch_supported()) return 0;
  constexpr int kSplitKeys = 16 * kRegWarps<true>, kBlocks = 64;
  const int64_t seq_blocks = std::max<int64_t>(int64_t(a.num_seqs) * a.Hkv, 1);
  const int by_keys = (a.max_context_len + kSplitKeys - 1) / kSplitKeys;
  const int by_blocks = int((kBlocks + seq_blocks - 1) / seq_blocks);
  return std::clamp(std::min(by_keys, by_blocks), 1, kMaxClusterBlocks);
}

void flash_decode(const AttentionArgs& a, int splits, bool clustered, float* partial, int sm_count, cudaStream_t s) {
  TESSERA_CHECK(!clustered || (splits > 1 && splits <= flash_decode_cluster_splits(a)),
                "flash decode: these splits cannot merge in a cluster");
  switch (a.Dh) {
    case 64: launch_decode<64>(a, splits, clustered, partial, sm_count, s); break;
    case 128: launch_decode<128>(a, splits, clustered, partial, sm_count, s); break;
    case 256: launch_decode<256>(a, splits, clustered, partial, sm_count, s); break;
    default: throw Error("flash decode: unsupported head_dim " + std::to_string(a.Dh));
  }
  check_launch("flash decode");
  if (splits > 1 && !clustered) combine_partials(partial, a.T * a.H, splits, a.Dh, a.out, a.out_dtype, s);
}

}  // namespace tessera::cuda

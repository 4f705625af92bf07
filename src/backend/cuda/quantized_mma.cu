// qmma: the products of 1-64 tokens with 4- or 8-bit MLX codes (bf16 or f16 scales and biases) on
// the tensor cores (mma.sync m16n8k16, sm_80+), reading the codes once, in the scales' 16-bit type
// as the widened weights would be.
//  - A block of 8 warps takes 128 weight rows (256 past 32 tokens) over a range of k. Its codes,
//    scales and biases and the matching x come through a ring of shared-memory stages of a row's
//    128-byte line of codes (256 k of 4 bits, 128 of 8) by cp.async, two stages in flight, so that
//    the weights stream at memory speed. A warp takes 32 rows (two m16 tiles); of 128 rows, warps
//    w and w + 4 each take one half of every stage, and their sums meet once at the end.
//  - A lane widens its codes to 16-bit fragments in registers: a word's nibbles j and j + 4 (4
//    bits), or two of its bytes (8 bits, f16), masked in place into the mantissas of a pair of 128s
//    (bf16) or 1024s (f16), less that number, are two codes exactly; times the group's scale plus
//    its bias is one rounding, as the host's widening. 8 bits in bf16 (whose 8 bits of precision
//    cannot hold 128 + q): a byte set into the mantissa of 2^23 (one prmt), less 2^23, is its code
//    as an f32, then scale * q + bias in f32 and one rounding to bf16.
//  - The mma's k order is free as long as both operands follow it: lane c takes a half's 16 bytes
//    from byte 16 c (one read: 32 codes of 4 bits, 16 of 8), and x is packed (pack_x_kernel) so
//    that ldmatrix hands each lane the activations of the same k in the same order. Up to 16
//    tokens the kernel packs f32 x itself as it stages it, a launch less a product: on an H100
//    (8B shape, decode tok/s at batch 1 / 2 / 4 / 8), 4-bit codes 370 / 722 / 1,383 / 2,654 with
//    pack_x_kernel, 394 / 757 / 1,485 / 2,889 without; 8-bit 248 / 486 / 944 / 1,840, 261 / 505 /
//    998 / 1,941. Which of a thread's items are the tile's and live is decided once: tested in the
//    loop, their sources were worked out every stage, 1-3% slower at batch 1 and 8.
//  - Tokens go in tiles of 8 (kNT tiles: 1 up to 8 tokens, 2, 4, 8 up to 64). The loop is bound
//    by its instructions, so it does no divisions (group sizes are powers of two) and works out
//    each thread's copy addresses once. Measured on H100s (two runs; 4-bit 8B, decode tok/s at
//    batch 1 / 8): 292 / 2,006 with two tiles from 1 token and divisions by the group size; one
//    tile 318 / 2,159; shifts 345 / 2,320; one lop3 a pair 351 / 2,359. 8-bit codes (bf16 scales),
//    at batch 1 / 2 / 8 / 32: 242 / 473 / 1,816 / 4,957, against 144 / 231 / 333 / 1,300 by qgemv to
//    2 tokens and widening past; 4-bit codes with f16 scales as with bf16 (363 / 708 / 2,615 / 5,969).
//    Self-packed x is read at fixed offsets from one pointer an item, and the ring's stages are
//    counters, not i % 3: 4-bit at batch 1 / 8 / 16, 391 / 2,902 / 4,830 -> 405 / 2,998 / 4,963.
//    Before that, widening was 58% of the one-tile kernel's instructions (ncu, gate+up, batch 1).
//  - Past one tile a warp widens one mma's A fragments at a time (an ldmatrix_x4 then brings two
//    tiles' B), which frees registers: 17-32 tokens spilled at their cap of 128, 33-64 at 255; now
//    only 8-bit codes with f16 scales at 17-32 tokens spill, 4 bytes.
//    With x packed up to 16 tokens, on an H100 (4-bit 8B, decode tok/s at batch 16 / 32 / 64, two
//    runs): 4,489, 4,516 / 6,353, 6,258 / 9,398, 9,354 before; 4,943, 4,910 / 6,895, 6,878 /
//    9,467, 9,494 after.
//  - Ranges of k write their sums to a scratch [splits, T, N], added in a fixed order afterwards;
//    one range (an 8B's gate/up and LM head products) writes the outputs itself, a launch less:
//    4-bit 8B decode on an H100 at batch 1 / 8 / 32 / 64, 375 / 2,703 / 5,990 / 8,890 tok/s with
//    the sum kernel, 394 / 2,873 / 6,249 / 9,306 without.
#include <algorithm>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
// k a stage (a row's codes: 128 bytes), and a half of a stage.
template <int kBits>
constexpr int kStageK = 1024 / kBits;
template <int kBits>
constexpr int kHalfK = kStageK<kBits> / 2;
// Rows a block: 128 (two warps a row, one half of each stage each) up to 32 tokens; at 64 tokens
// 256 (one warp a row, both halves), so that the staged x, as large as the codes there, serves
// twice the rows.
template <int kNT>
constexpr int kRowsFor = kNT == 8 ? 256 : 128;

// A stage in shared memory: each row's 128 bytes of codes (its 16-byte pieces swapped by halves
// on odd rows, so that a quarter warp's reads of rows g and g + 1 fall in different banks), its 8
// scales and 8 biases (the aligned eight holding the stage's groups), then the tokens' packed x,
// rows kXld bytes apart (the stage's k in bf16 + 16: the 8 rows an ldmatrix reads fall in
// different banks).
template <int kBits, int kNT>
struct Stage {
  static constexpr int kRows = kRowsFor<kNT>;
  static constexpr int kScales = kRows * 128, kBiases = kScales + kRows * 16, kX = kBiases + kRows * 16;
  static constexpr int kXld = kStageK<kBits> * 2 + 16, bytes = kX + kNT * 8 * kXld;
};
// Ring stages: three (two blocks an SM up to 32 tokens, one at 64).
constexpr int kStages = 3;

// The products run in the scales' 16-bit type H (bf16 or f16), as the widened weights would; H2
// holds a pair.
template <class H>
constexpr bool kF16 = std::is_same_v<H, __half>;
template <class H>
using H2 = std::conditional_t<kF16<H>, __half2, __nv_bfloat162>;

template <class P>
__device__ __forceinline__ uint32_t bits_of(P v) {
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Nibbles j and j + 4 of w (shift 4 j) as an H pair (lower element low), times s plus b.
template <class H>
__device__ __forceinline__ uint32_t widen_nibbles(uint32_t w, int shift, H2<H> s, H2<H> b) {
  // (w >> shift) & mask | a pair of 128s (bf16) or 1024s (f16): that number + q, exact. One lop3
  // with both constants in registers; written in C++ it becomes two, as an instruction takes one
  // immediate. Less the number, times s plus b, is one rounding, as the host widens.
  uint32_t v;
  const uint32_t magic = kF16<H> ? 0x64006400u : 0x43004300u;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(w >> shift), "r"(0x000F000Fu), "r"(magic));
  const H2<H> q = __hsub2(*reinterpret_cast<const H2<H>*>(&v), *reinterpret_cast<const H2<H>*>(&magic));
  return bits_of(__hfma2(q, s, b));
}

// Bytes i and i + 1 of w as an H pair (lower element low), times s plus b (f32 for bf16, whose 8
// bits cannot hold 128 + q).
template <class H, class S>
__device__ __forceinline__ uint32_t widen_bytes(uint32_t w, int i, S s, S b) {
  if constexpr (kF16<H>) {
    // Bytes i and i + 1 into the mantissas of a pair of 1024s: 1024 + q, exact in f16.
    const uint32_t v = __byte_perm(w, 0x64646464u, 0x4040 + i + ((i + 1) << 8));
    const uint32_t magic = 0x64006400u;
    const __half2 q =
        __hsub2(*reinterpret_cast<const __half2*>(&v), *reinterpret_cast<const __half2*>(&magic));
    return bits_of(__hfma2(q, s, b));
  } else {
    // Byte i into the mantissa of 2^23 (0x4B000000): 2^23 + q, exact; less 2^23 it is q.
    const float lo = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 + i)) - 8388608.0f;
    const float hi = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7441 + i)) - 8388608.0f;
    return bits_of(__floats2bfloat162_rn(fmaf(s, lo, b), fmaf(s, hi, b)));
  }
}

__device__ __forceinline__ uint32_t word_of(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// x [T, K] f32 → bf16 in the packed order of each half of a stage: mma j's b0 and b1 (ldmatrix
// blocks 2 j and 2 j + 1, lane c's pair at 2 c) hold the elements whose codes lane c widens into
// its a0 and a2. One thread an output pair.
//  - 4 bits: lane c's codes are elements 32 c .. 32 c + 31 of a half (the half's words 4 c ..
//    4 c + 3 of the row); mma j (0-7) takes nibbles j % 4 and j % 4 + 4 of word 2 (j / 4) as a0
//    and of word 2 (j / 4) + 1 as a2.
//  - 8 bits: lane c's codes are elements 16 c .. 16 c + 15 (words 4 c .. 4 c + 3); mma j (0-3)
//    takes bytes 0 and 1 of word j as a0, bytes 2 and 3 as a2.
// The packed pair at (even) position q of a half holds its elements r and r + kApart<kBits>.
template <int kBits>
constexpr int kApart = kBits == 4 ? 4 : 1;
template <int kBits>
__host__ __device__ constexpr int packed_source(int q) {
  const int m = q / 8, c = (q % 8) / 2, j = m / 2, s = m % 2;
  return kBits == 4 ? 32 * c + 16 * (j / 4) + 8 * s + j % 4 : 16 * c + 4 * j + 2 * s;
}
// The 4 pairs of a packed 8-element piece (first at q0, a multiple of 8) come from elements
// kPairsApart apart: packed_source(q0 + 2 c) = packed_source(q0) + c * kPairsApart, so a thread
// that packs a piece reads them at fixed offsets from one pointer.
template <int kBits>
constexpr int kPairsApart = kBits == 4 ? 32 : 16;
template <int kBits>
constexpr bool pairs_evenly_apart() {
  for (int q0 = 0; q0 < kHalfK<kBits>; q0 += 8)
    for (int c = 0; c < 4; ++c)
      if (packed_source<kBits>(q0 + 2 * c) != packed_source<kBits>(q0) + c * kPairsApart<kBits>) return false;
  return true;
}
static_assert(pairs_evenly_apart<4>() && pairs_evenly_apart<8>(), "a piece's pairs at fixed offsets");

template <class H>
__device__ __forceinline__ uint32_t pack_pair(float a, float b) {
  if constexpr (kF16<H>) return bits_of(__floats2half2_rn(a, b));
  else return bits_of(__floats2bfloat162_rn(a, b));
}

template <int kBits, class H>
__global__ void pack_x_kernel(const float* __restrict__ x, int64_t n_pairs, H* __restrict__ out) {
  wait_for_previous();
  allow_next();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_pairs) return;
  constexpr int kHalf = kHalfK<kBits>;
  const int64_t p = 2 * i;
  const float* src = x + p / kHalf * kHalf;
  const int r = packed_source<kBits>(int(p % kHalf));
  reinterpret_cast<uint32_t*>(out)[i] = pack_pair<H>(src[r], src[r + kApart<kBits>]);
}

// x as qmma_kernel reads it: up to kQmmaSelfPackTokens (two token tiles) f32 [T, K], packed by the
// kernel itself as it stages them (a launch less a product, where decode steps are short); more,
// packed H [T, K] (pack_x_kernel).
template <int kNT>
constexpr bool kSelfPack = kNT * 8 <= kQmmaSelfPackTokens;
template <class H, int kNT>
using XIn = std::conditional_t<kSelfPack<kNT>, float, H>;

// part[split][t][n] = x[t, k range] · w[n, k range]ᵀ for T <= 8 kNT tokens, each split
// `per_split` stages. Grid (row blocks of kRows, splits). With one split the sums go straight to
// the outputs of `parts` (part unused): no sum kernel after.
template <int kBits, class H, int kNT>
__global__ void __launch_bounds__(kThreads, kNT == 8 ? 1 : 2)
    qmma_kernel(const XIn<H, kNT>* __restrict__ x, int T, QuantizedMatrix w, int64_t N, int64_t K,
                int per_split, float* __restrict__ part, StackedParts parts) {
  using S = Stage<kBits, kNT>;
  constexpr int kRows = kRowsFor<kNT>, kRowWarps = kRows / 32, kWarpHalves = kRowWarps * 2 / kWarps;
  constexpr int kStage = kStageK<kBits>, kHalf = kHalfK<kBits>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;
  const int wrow = warp % kRowWarps * 32;  // this warp's first row
  const int64_t stages = K / kStage, s0 = int64_t(blockIdx.y) * per_split;
  const int64_t s1 = s0 + per_split < stages ? s0 + per_split : stages;
  const int count = s1 > s0 ? int(s1 - s0) : 0;
  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  const int gshift = __ffs(w.group_size) - 1;  // groups are 32, 64 or 128: shifts, not divisions
  const int64_t groups = K >> gshift;

  // Thread t copies piece t % 8 of rows t / 8 + 32 i, and item t + 256 i of the rows' scales then
  // biases; rows past N are zero-filled, so that their products are 0. Where each comes from and
  // goes is fixed but for the stage: worked out once.
  constexpr int kCodeItems = kRows / 32, kScaleItems = kRows / 128;
  const unsigned char* code_src[kCodeItems];
  int code_dst[kCodeItems];
  bool code_live[kCodeItems];
#pragma unroll
  for (int i = 0; i < kCodeItems; ++i) {
    const int r = tid / 8 + 32 * i, p = tid % 8;
    code_live[i] = row0 + r < N;
    code_src[i] = reinterpret_cast<const unsigned char*>(w.codes) +
                  (code_live[i] ? row0 + r : 0) * (K * kBits / 8) + p * 16;
    code_dst[i] = r * 128 + (p ^ ((r & 1) << 2)) * 16;
  }
  const __nv_bfloat16* scale_src[kScaleItems];
  bool scale_live[kScaleItems];
#pragma unroll
  for (int i = 0; i < kScaleItems; ++i) {
    const int item = tid + kThreads * i, r = item % kRows;
    scale_live[i] = row0 + r < N;
    // A row's groups start at a multiple of 8 ((K / gs) % 8 == 0), and a stage's (at most 8) lie
    // in an aligned eight: the row's groups from ((st * kStage) >> gshift) & ~7.
    scale_src[i] = static_cast<const __nv_bfloat16*>(item < kRows ? w.scales : w.biases) +
                   (scale_live[i] ? row0 + r : 0) * groups;
  }
  auto issue_w = [&](int64_t st, int buf) {
    unsigned char* base = smem + buf * S::bytes;
#pragma unroll
    for (int i = 0; i < kCodeItems; ++i)
      cp_async16(base + code_dst[i], code_src[i] + st * 128, code_live[i]);
    const int64_t first = ((st * kStage) >> gshift) & ~int64_t(7);
#pragma unroll
    for (int i = 0; i < kScaleItems; ++i)  // the biases right after the scales
      cp_async16(base + S::kScales + (tid + kThreads * i) * 16, scale_src[i] + first, scale_live[i]);
  };
  // x: a thread's item i is 16 bytes (piece xp) of token xt + kItemTokens i's row, where that
  // token is one of the tile's. Past kQmmaSelfPackTokens, packed, by cp.async. Up to that (two
  // items a thread at most) it comes as f32: a thread reads its items' elements into registers as
  // a stage is requested (issue_x) and packs them into that stage once the current one is
  // multiplied (store_x), so that the reads' latency is hidden as cp.async's is.
  constexpr int kPieces = kStage / 8, kItemTokens = kThreads / kPieces;
  constexpr int kXItems = (kNT * 8 + kItemTokens - 1) / kItemTokens;
  const int xt = tid / kPieces, xp = tid % kPieces;
  bool x_item[kXItems], x_live[kXItems];
#pragma unroll
  for (int i = 0; i < kXItems; ++i) {
    x_item[i] = xt + kItemTokens * i < kNT * 8;
    x_live[i] = x_item[i] && xt + kItemTokens * i < T;
  }
  float xr[kSelfPack<kNT> ? kXItems : 1][8];
  // Self-packed, the item's 8 elements at stage st lie at x_first[i] + st * kStage plus fixed
  // offsets (pairs_evenly_apart).
  const float* x_first[kSelfPack<kNT> ? kXItems : 1];
  if constexpr (kSelfPack<kNT>) {
    const int q0 = xp * 8 % kHalf;
#pragma unroll
    for (int i = 0; i < kXItems; ++i)
      x_first[i] =
          x +
          (x_live[i] ? (xt + kItemTokens * i) * K + xp * 8 / kHalf * kHalf + packed_source<kBits>(q0) : 0);
  }
  auto issue_x = [&](int64_t st, int buf) {
    unsigned char* base = smem + buf * S::bytes + S::kX;
#pragma unroll
    for (int i = 0; i < kXItems; ++i) {
      if constexpr (kSelfPack<kNT>) {
        const float* src = x_first[i] + (x_live[i] ? st * kStage : 0);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          xr[i][2 * c] = x_live[i] ? src[c * kPairsApart<kBits>] : 0.0f;
          xr[i][2 * c + 1] = x_live[i] ? src[c * kPairsApart<kBits> + kApart<kBits>] : 0.0f;
        }
      } else if (x_item[i]) {
        const int64_t row = (xt + kItemTokens * i) * K + st * kStage;
        cp_async16(base + (xt + kItemTokens * i) * S::kXld + xp * 16, x + (x_live[i] ? row + xp * 8 : 0),
                   x_live[i]);
      }
    }
  };
  auto store_x = [&](int buf) {
    if constexpr (kSelfPack<kNT>) {
#pragma unroll
      for (int i = 0; i < kXItems; ++i) {
        if (!x_item[i]) continue;
        const uint4 v = {pack_pair<H>(xr[i][0], xr[i][1]), pack_pair<H>(xr[i][2], xr[i][3]),
                         pack_pair<H>(xr[i][4], xr[i][5]), pack_pair<H>(xr[i][6], xr[i][7])};
        *reinterpret_cast<uint4*>(smem + buf * S::bytes + S::kX + (xt + kItemTokens * i) * S::kXld +
                                  xp * 16) = v;
      }
    }
  };

  // The weights are only read: the first stages' are requested before the previous kernel ends.
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b)
    if (b < count) issue_w(s0 + b, b);
  wait_for_previous();
  allow_next();
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) {
    if (b >= count) break;
    issue_x(s0 + b, b);
    store_x(b);
  }
  cp_async_commit();
#pragma unroll
  for (int b = 1; b < kStages - 1; ++b) cp_async_commit();  // one group a stage from here on

  // One ldmatrix_x4 a step: the B fragments of kJ mmas (j0 ..) for kN token tiles (n0 ..); its
  // matrix m (lanes 8 m ..) is block 2 j0 + m % (2 kJ) of tile n0 + m / (2 kJ), so that this lane's
  // address is b_lane past the step's. Past one tile, one mma's A fragments at a time: fewer
  // registers hold them beside the sums.
  constexpr int kJ = kNT == 1 ? 2 : 1, kN = 2 / kJ;
  const int m = lane / 8, b_lane = (m / (2 * kJ) * 8 + lane % 8) * S::kXld + m % (2 * kJ) * 16;
  float acc[2][kNT][4] = {};
  // The ring's stage read this step (i % kStages) and the one refilled (i + kStages - 1), kept
  // as counters: the loop is bound by its instructions.
  int read = 0, fill = kStages - 1;
  for (int i = 0; i < count; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage i is in; the stage refilled next was read by every warp
    const bool refill = i + kStages - 1 < count;
    if (refill) {
      issue_w(s0 + i + kStages - 1, fill);
      issue_x(s0 + i + kStages - 1, fill);
    }
    cp_async_commit();

    const unsigned char* base = smem + read * S::bytes;
    const int64_t st = s0 + i;
#pragma unroll
    for (int hh = 0; hh < kWarpHalves; ++hh) {
      const int half = kWarpHalves == 2 ? hh : warp / kRowWarps;  // the half this warp multiplies
      // This lane's scale of each row: the stage's first group's place among the aligned eight,
      // plus the groups before its first element.
      const int sel = int(((st * kStage) >> gshift) & 7) + ((half * kHalf + 128 / kBits * c) >> gshift);
      uint4 q[2][2];
      // The scales and biases as H pairs; 8 bits in bf16: as f32.
      using Sc = std::conditional_t<kBits == 8 && !kF16<H>, float, H2<H>>;
      Sc sc[2][2], bi[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = wrow + mt * 16 + h * 8 + g;
          q[mt][h] = *reinterpret_cast<const uint4*>(base + r * 128 + ((half * 4 + c) ^ ((r & 1) << 2)) * 16);
          const auto* sp = reinterpret_cast<const __nv_bfloat16*>(base + S::kScales + r * 16);
          const auto* bp = reinterpret_cast<const __nv_bfloat16*>(base + S::kBiases + r * 16);
          if constexpr (kF16<H>) {
            sc[mt][h] = __half2half2(reinterpret_cast<const __half*>(sp)[sel]);
            bi[mt][h] = __half2half2(reinterpret_cast<const __half*>(bp)[sel]);
          } else if constexpr (kBits == 4) {
            sc[mt][h] = __bfloat162bfloat162(sp[sel]);
            bi[mt][h] = __bfloat162bfloat162(bp[sel]);
          } else {
            sc[mt][h] = __bfloat162float(sp[sel]);
            bi[mt][h] = __bfloat162float(bp[sel]);
          }
        }
#pragma unroll
      for (int j0 = 0; j0 < kHalf / 16; j0 += kJ) {
        unsigned a[kJ][2][4];  // the A fragments of mmas j0 .. j0 + kJ - 1, both m tiles
#pragma unroll
        for (int e = 0; e < kJ; ++e) {
          const int j = j0 + e;
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            if constexpr (kBits == 4) {
              const int wi = 2 * (j / 4), shift = 4 * (j % 4);
              a[e][mt][0] = widen_nibbles<H>(word_of(q[mt][0], wi), shift, sc[mt][0], bi[mt][0]);
              a[e][mt][1] = widen_nibbles<H>(word_of(q[mt][1], wi), shift, sc[mt][1], bi[mt][1]);
              a[e][mt][2] = widen_nibbles<H>(word_of(q[mt][0], wi + 1), shift, sc[mt][0], bi[mt][0]);
              a[e][mt][3] = widen_nibbles<H>(word_of(q[mt][1], wi + 1), shift, sc[mt][1], bi[mt][1]);
            } else {
              a[e][mt][0] = widen_bytes<H>(word_of(q[mt][0], j), 0, sc[mt][0], bi[mt][0]);
              a[e][mt][1] = widen_bytes<H>(word_of(q[mt][1], j), 0, sc[mt][1], bi[mt][1]);
              a[e][mt][2] = widen_bytes<H>(word_of(q[mt][0], j), 2, sc[mt][0], bi[mt][0]);
              a[e][mt][3] = widen_bytes<H>(word_of(q[mt][1], j), 2, sc[mt][1], bi[mt][1]);
            }
          }
        }
#pragma unroll
        for (int n0 = 0; n0 < kNT; n0 += kN) {
          unsigned b[4];
          tc::ldmatrix_x4(b, base + S::kX + b_lane + n0 * 8 * S::kXld + half * kHalf * 2 + j0 * 32);
#pragma unroll
          for (int nn = 0; nn < kN; ++nn)
#pragma unroll
            for (int e = 0; e < kJ; ++e)
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) {
                const unsigned* bf = b + nn * 2 * kJ + 2 * e;
                if constexpr (kF16<H>)
                  tc::mma_f16(acc[mt][n0 + nn], a[e][mt], bf[0], bf[1]);
                else
                  tc::mma(acc[mt][n0 + nn], a[e][mt], bf[0], bf[1]);
              }
        }
      }
    }
    if (refill) store_x(fill);
    read = read == kStages - 1 ? 0 : read + 1;
    fill = fill == kStages - 1 ? 0 : fill + 1;
  }
  cp_async_wait<0>();
  // The second half's sums go to the first through the (now free) ring, sum v of every lane of
  // the block's first half side by side (no bank conflicts).
  constexpr int kLanes = kRowWarps * 32;
  auto* second = reinterpret_cast<float*>(smem) + warp % kRowWarps * 32 + lane;
  const bool first_half = kWarpHalves == 2 || warp < kRowWarps;
  __syncthreads();
  if (!first_half) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) second[((mt * kNT + nt) * 4 + i) * kLanes] = acc[mt][nt][i];
  }
  __syncthreads();
  if (!first_half) return;
  const bool whole = gridDim.y == 1;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t n = row0 + wrow + mt * 16 + h * 8 + g;
      if (n >= N) continue;
      // Where row n's sums go: its part's output, or this split's scratch.
      const PartRow p =
          whole ? part_row(parts, n) : PartRow{nullptr, part + int64_t(blockIdx.y) * T * N, 0, N};
      float* out = static_cast<float*>(p.out) + (n - p.first);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int t = nt * 8 + 2 * c + e, i = 2 * h + e;
          if (t < T)
            out[t * p.width] = kWarpHalves == 2 ? acc[mt][nt][i]
                                                : acc[mt][nt][i] + second[((mt * kNT + nt) * 4 + i) * kLanes];
        }
    }
}

// out of each part of g [T, its rows] = the sum of part[0 .. splits)[t][n], in split order.
__global__ void qmma_sum_kernel(const float* __restrict__ part, int splits, int64_t T, int64_t N,
                                StackedParts g) {
  wait_for_previous();
  allow_next();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * N) return;
  const int64_t t = i / N, n = i % N;
  float v = 0.0f;
  for (int s = 0; s < splits; ++s) v += part[s * T * N + i];
  const PartRow p = part_row(g, n);
  static_cast<float*>(p.out)[t * p.width + n - p.first] = v;
}

template <int kBits, int kNT>
constexpr size_t kSmemBytes = size_t(kStages) * Stage<kBits, kNT>::bytes;

// Blocks of the kernel for kBits, H and kNT that the GPU runs at once (its shared-memory limit
// raised on first use).
template <int kBits, class H, int kNT>
int resident_blocks() {
  static const int blocks = [] {
    auto kernel = qmma_kernel<kBits, H, kNT>;
    constexpr size_t smem = kSmemBytes<kBits, kNT>;
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
          "qmma shared memory");
    int dev = 0, sms = 0, per_sm = 0;
    check(cudaGetDevice(&dev), "qmma device");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "qmma SM count");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem), "qmma occupancy");
    return sms * std::max(per_sm, 1);
  }();
  return blocks;
}

template <class H>
struct TypeTag {
  using type = H;
};

// f(bits, h, nt) for w's form: bits (4 or 8) and nt (the token tiles that T tokens take: 1 up to
// 8 tokens, then 2, 4, 8 up to 64) as std::integral_constants, h a TypeTag of H.
template <class F>
auto with_kernel(const QuantizedMatrix& w, int64_t T, F f) {
  auto tiles = [&](auto b, auto h) {
    if (T <= 8) return f(b, h, std::integral_constant<int, 1>{});
    if (T <= 16) return f(b, h, std::integral_constant<int, 2>{});
    if (T <= 32) return f(b, h, std::integral_constant<int, 4>{});
    return f(b, h, std::integral_constant<int, 8>{});
  };
  auto types = [&](auto b) {
    return w.scale_dtype == DType::F16 ? tiles(b, TypeTag<__half>{})
                                       : tiles(b, TypeTag<__nv_bfloat16>{});
  };
  return w.bits == 4 ? types(std::integral_constant<int, 4>{}) : types(std::integral_constant<int, 8>{});
}

template <int kBits, class H, int kNT>
void launch(const XIn<H, kNT>* x, int T, const QuantizedMatrix& w, int64_t N, int64_t K, int splits,
            float* part, const StackedParts& g, cudaStream_t s) {
  resident_blocks<kBits, H, kNT>();  // raises the shared-memory limit
  const int64_t stages = K / kStageK<kBits>;
  const int per_split = int((stages + splits - 1) / splits);
  const dim3 grid(unsigned((N + kRowsFor<kNT> - 1) / kRowsFor<kNT>), unsigned(splits));
  launch_dependent(qmma_kernel<kBits, H, kNT>, grid, dim3(kThreads), kSmemBytes<kBits, kNT>, s, x, T, w, N, K,
                   per_split, part, g);
}

}  // namespace

bool qmma_applies(const QuantizedMatrix& w, int64_t T, int64_t K) {
  const bool widths_ok =
      (w.bits == 4 || w.bits == 8) && (w.scale_dtype == DType::BF16 || w.scale_dtype == DType::F16);
  if (!widths_ok) return false;
  const int64_t stage_k = w.bits == 4 ? kStageK<4> : kStageK<8>;
  const bool groups_ok = (w.group_size == 32 || w.group_size == 64 || w.group_size == 128) &&
                         K % stage_k == 0 && (K / w.group_size) % 8 == 0;
  return T >= 1 && T <= kQmmaMaxTokens && groups_ok && aligned16(w.codes) && aligned16(w.scales) &&
         aligned16(w.biases) && compute_capability().first >= 8;
}

int qmma_splits(const QuantizedMatrix& w, int64_t T, int64_t N, int64_t K) {
  // As many k ranges as fill the blocks the GPU runs at once (at least half of them), each at
  // least two stages long, with none left empty.
  const auto [resident, rows, stage_k] = with_kernel(w, T, [](auto b, auto h, auto nt) {
    using H = typename decltype(h)::type;
    return std::tuple<int64_t, int64_t, int64_t>{resident_blocks<b(), H, nt()>(), kRowsFor<nt()>,
                                                 kStageK<b()>};
  });
  const int64_t row_blocks = (N + rows - 1) / rows, stages = K / stage_k;
  int64_t splits = std::clamp<int64_t>(resident / row_blocks, 1, std::max<int64_t>(stages / 2, 1));
  const int64_t per_split = (stages + splits - 1) / splits;
  return int((stages + per_split - 1) / per_split);
}

void qmma(const float* x, void* x16, const QuantizedMatrix& w, const StackedParts& g, int64_t T, int64_t K,
          float* part, int splits, cudaStream_t s) {
  const int64_t N = g.rows_end[g.count - 1], pairs = T * K / 2;
  with_kernel(w, T, [&](auto b, auto h, auto nt) {
    using H = typename decltype(h)::type;
    if constexpr (kSelfPack<nt()>) {
      launch<b(), H, nt()>(x, int(T), w, N, K, splits, part, g, s);
    } else {
      auto* xp = static_cast<H*>(x16);
      launch_dependent(pack_x_kernel<b(), H>, dim3(unsigned((pairs + 255) / 256)), dim3(256), 0, s, x, pairs,
                       xp);
      check_launch("qmma pack");
      launch<b(), H, nt()>(xp, int(T), w, N, K, splits, part, g, s);
    }
    check_launch("qmma");
  });
  if (splits == 1) return;
  const int64_t n = T * N;
  launch_dependent(qmma_sum_kernel, dim3(unsigned((n + 255) / 256)), dim3(256), 0, s, part, splits, T, N, g);
  check_launch("qmma sum");
}

}  // namespace tessera::cuda

// MLX-quantized weights kept as codes on the GPU (core/quantization.h's layout).
//  - qgemv: the decode products of 1-2 tokens read the codes once. A warp takes 2 or 4 rows; lane
//    l reads words l, l + 32, ... of each (8 4-bit or 4 8-bit codes), so that the activations
//    of a word are read once for the warp's rows and its 32 lanes read them contiguously. A code
//    becomes a float without a conversion instruction: masked in place and set into the
//    mantissa of 2^23 it reads 2^23 + q * 2^(bits j), so one subtraction leaves q scaled by a
//    power of two, which the group's scale (divided by the same power) undoes.
//  - qmma: 3-64 tokens of 4-bit codes with bf16 scales on the tensor cores (mma.sync, sm_80+).
//    A warp takes 32 rows (two m16 tiles) over a k range: each lane reads the 32 code bytes of
//    a row's 64-wide chunk (the four lanes of a row read the same bytes), keeps the byte that
//    holds its fragment's two codes, and widens them to bf16 pairs (set into the mantissa of 128,
//    less 128: exact) times the group's scale plus its bias (one rounding, as the host's
//    widening to bf16). The activations are rounded to bf16 as for bf16 weights. Ranges of k
//    are summed afterwards in a fixed order (qmma_sum).
//  - widen: any width and group size, weights (or a table's gathered rows) rewritten as f32 or
//    16-bit values, for the products of more tokens (then the 16-bit paths run) and embeddings.
#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block of qgemv

// Code i (bits wide) of a little-endian bit stream: it spans at most two bytes, and the second is
// read only if it does (the last code may end the buffer).
__device__ __forceinline__ uint32_t code_at(const uint8_t* bytes, int64_t i, int bits) {
  const int64_t bit = i * bits;
  const int sh = int(bit % 8);
  uint32_t two = bytes[bit / 8];
  if (sh + bits > 8) two |= uint32_t(bytes[bit / 8 + 1]) << 8;
  return two >> sh & ((1u << bits) - 1);
}

// out[r, c] = (scale_g * q + bias_g) * mul for the elements e = src_row(r) * L + c of the
// flattened weight, src_row(r) = ids ? ids[r] : r0 + r; out is [R, L] of O. One thread per 8
// columns of a row: one division finds its first element's group, the rest count on from it.
template <class O>
__global__ void widen_kernel(QuantizedMatrix w, const int32_t* __restrict__ ids, int64_t r0, int64_t R,
                             int64_t L, float mul, O* __restrict__ out) {
  const int64_t octets = (L + 7) / 8, idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= R * octets) return;
  const int64_t r = idx / octets, c0 = (idx % octets) * 8;
  const int64_t e0 = (ids ? int64_t(ids[r]) : r0 + r) * L + c0;
  const auto* bytes = reinterpret_cast<const uint8_t*>(w.codes);
  int64_t g = e0 / w.group_size;
  int left = int((g + 1) * w.group_size - e0);  // elements before the next group
  float s = load_as(w.scales, w.scale_dtype, g), b = load_as(w.biases, w.scale_dtype, g);
  float v[8];
  const int n = L - c0 < 8 ? int(L - c0) : 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (j >= n) continue;
    if (left == 0) {
      ++g, left = w.group_size;
      s = load_as(w.scales, w.scale_dtype, g), b = load_as(w.biases, w.scale_dtype, g);
    }
    --left;
    v[j] = fmaf(s, float(code_at(bytes, e0 + j, w.bits)), b) * mul;  // as the host computes it
  }
  O* dst = out + r * L + c0;
  if (n == 8 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    store8(dst, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) dst[j] = from_f32<O>(v[j]);
  }
}

// acc[r][t] += row r's word of codes (its group's scale and bias) · x[t][k ...], for the 32 / kBits
// elements from k. A code masked in place and set into the mantissa of 2^23 reads 2^23 + q 2^(kBits
// j); less 2^23 it is q scaled by a power of two that the scale, divided by it, undoes.
template <int kBits, int kRows, int kTokens>
__device__ __forceinline__ void word_dot(const uint32_t (&q)[kRows], const float (&scale)[kRows],
                                         const float (&bias)[kRows], const float* __restrict__ x, int64_t ld,
                                         int T, float (&acc)[kRows][kTokens]) {
  constexpr int kPerHalf = 16 / kBits, kPerWord = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  float w[kRows][kPerWord];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t half = h ? q[r] >> 16 : q[r];
#pragma unroll
      for (int j = 0; j < kPerHalf; ++j) {
        const float shifted = __int_as_float(int((half & (kMask << (kBits * j))) | 0x4B000000u)) - 8388608.0f;
        w[r][h * kPerHalf + j] = fmaf(shifted, scale[r] * (1.0f / float(1u << (kBits * j))), bias[r]);
      }
    }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= T) break;
    const float4* xp = reinterpret_cast<const float4*>(x + t * ld);
#pragma unroll
    for (int i = 0; i < kPerWord / 4; ++i) {
      const float4 a = __ldg(xp + i);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        acc[r][t] = fmaf(w[r][4 * i], a.x, acc[r][t]);
        acc[r][t] = fmaf(w[r][4 * i + 1], a.y, acc[r][t]);
        acc[r][t] = fmaf(w[r][4 * i + 2], a.z, acc[r][t]);
        acc[r][t] = fmaf(w[r][4 * i + 3], a.w, acc[r][t]);
      }
    }
  }
}

// out[t, n] = x[t] · w[n] for T <= kTokens tokens, w's rows numbered across g's parts (their codes,
// scales and biases consecutive, as upload_group stacks them; w holds the first part's). A warp
// takes kRows rows; lane l reads words l, l + 32, ... of each, so that the warp's activations
// for a word of every row are one contiguous read, made once for the kRows rows. The first
// kPrefetch words of each row are read before the previous kernel has finished (gemv.cu).
template <int kBits, int kRows, int kTokens>
__global__ void __launch_bounds__(kWarps * 32)
    qgemv_kernel(const float* __restrict__ x, int T, QuantizedMatrix w, StackedParts g, int64_t rows, int64_t K) {
  constexpr int kPerWord = 32 / kBits, kPrefetch = 4;
  const int lane = threadIdx.x % 32;
  const int64_t n0 = (int64_t(blockIdx.x) * kWarps + threadIdx.x / 32) * kRows;
  if (n0 >= rows) return;
  const int64_t words = K / kPerWord, groups = K / w.group_size, per_group = w.group_size / kPerWord;
  const uint32_t* codes[kRows];
  int64_t group0[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t n = n0 + r < rows ? n0 + r : rows - 1;  // past the last row: a copy of it, not written
    codes[r] = w.codes + n * words;
    group0[r] = n * groups;
  }
  uint32_t pre[kPrefetch][kRows];
#pragma unroll
  for (int i = 0; i < kPrefetch; ++i)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (lane + 32 * i < words) pre[i][r] = __ldg(codes[r] + lane + 32 * i);
  wait_for_previous();
  allow_next();
  float acc[kRows][kTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;
  auto step = [&](const uint32_t (&q)[kRows], int64_t wi) {
    float scale[kRows], bias[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t gi = group0[r] + wi / per_group;
      scale[r] = load_as(w.scales, w.scale_dtype, gi), bias[r] = load_as(w.biases, w.scale_dtype, gi);
    }
    word_dot<kBits, kRows, kTokens>(q, scale, bias, x + wi * kPerWord, K, T, acc);
  };
#pragma unroll
  for (int i = 0; i < kPrefetch; ++i)
    if (lane + 32 * i < words) step(pre[i], lane + 32 * i);
#pragma unroll 2
  for (int64_t wi = lane + 32 * kPrefetch; wi < words; wi += 32) {
    uint32_t q[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) q[r] = __ldg(codes[r] + wi);
    step(q, wi);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (n0 + r >= rows) break;
      const PartRow part = part_row(g, n0 + r);
      float* out = static_cast<float*>(part.out);
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
        if (t < T) out[t * part.width + n0 + r - part.first] = acc[r][t];
    }
}

template <int kBits, int kRows, int kTokens>
void launch_qgemv(const float* x, int T, const QuantizedMatrix& w, const StackedParts& g, int64_t K,
                  cudaStream_t s) {
  const int64_t rows = g.rows_end[g.count - 1], per_block = kWarps * kRows;
  launch_dependent(qgemv_kernel<kBits, kRows, kTokens>, dim3(unsigned((rows + per_block - 1) / per_block)),
                   dim3(kWarps * 32), 0, s, x, T, w, g, rows, K);
}

// Two rows a warp, or four where that still leaves every SM a few blocks (the MLP's gate/up, the
// LM head): each word of activations serves more rows.
template <int kBits, int kTokens>
void launch_rows(const float* x, int T, const QuantizedMatrix& w, const StackedParts& g, int64_t K,
                 cudaStream_t s) {
  if (g.rows_end[g.count - 1] >= 12288) launch_qgemv<kBits, 4, kTokens>(x, T, w, g, K, s);
  else launch_qgemv<kBits, 2, kTokens>(x, T, w, g, K, s);
}

template <int kBits>
void dispatch_tokens(const float* x, int T, const QuantizedMatrix& w, const StackedParts& g, int64_t K,
                     cudaStream_t s) {
  static_assert(kQgemvMaxTokens == 2, "one instantiation per token count");
  if (T == 1) launch_rows<kBits, 1>(x, T, w, g, K, s);
  else launch_rows<kBits, 2>(x, T, w, g, K, s);
}

// The bf16 pair (lower element low) of the two 4-bit codes in byte `sel & 3` of w, times s plus b.
__device__ __forceinline__ uint32_t widen_pair(uint32_t w, uint32_t sel, __nv_bfloat162 s, __nv_bfloat162 b) {
  const uint32_t byte = __byte_perm(w, 0, sel);
  const uint32_t v = ((byte | (byte << 12)) & 0x000F000Fu) | 0x43004300u;  // 128 + lo, 128 + hi
  const __nv_bfloat162 q = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), __floats2bfloat162_rn(128.0f, 128.0f));
  const __nv_bfloat162 r = __hfma2(q, s, b);
  return *reinterpret_cast<const uint32_t*>(&r);
}

__device__ __forceinline__ uint32_t word_of(const uint4 (&q)[2], int i) {
  const uint4& h = q[i / 4];
  return i % 4 == 0 ? h.x : i % 4 == 1 ? h.y : i % 4 == 2 ? h.z : h.w;
}

constexpr int kMmaWarps = 4, kMmaRows = kMmaWarps * 32;

// part[split][t][n] = x[t, k range of split] · w[n, same]ᵀ for T <= 8 kNT tokens (x bf16 [T, K]),
// k ranges of `chunks_per_split` 64-wide chunks. Grid (row blocks of kMmaRows, splits).
template <int kNT>
__global__ void __launch_bounds__(kMmaWarps * 32)
    qmma_kernel(const __nv_bfloat16* __restrict__ x, int T, QuantizedMatrix w, int64_t N, int64_t K,
                int64_t chunks_per_split, float* __restrict__ part) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int64_t chunks = K / 64, c0 = blockIdx.y * chunks_per_split;
  const int64_t c1 = c0 + chunks_per_split < chunks ? c0 + chunks_per_split : chunks;
  const int64_t row0 = int64_t(blockIdx.x) * kMmaRows + warp * 32, words = K / 8, groups = K / w.group_size;
  const uint32_t sel = 0x4440u | uint32_t(c);
  const auto* scales = static_cast<const __nv_bfloat16*>(w.scales);
  const auto* biases = static_cast<const __nv_bfloat16*>(w.biases);
  // Rows g and g + 8 of each m tile: [tile][half].
  int64_t row[2][2];
  bool live[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) row[mt][h] = row0 + mt * 16 + h * 8 + g, live[mt][h] = row[mt][h] < N;
  // A chunk's codes, and the scales and biases of its two halves' groups (32, 64 or 128 wide), read
  // a chunk ahead of their use: [tile][half (row g or g + 8)][chunk half].
  struct Chunk {
    uint4 q[2][2][2];
    __nv_bfloat16 s[2][2][2], b[2][2][2];
  };
  auto load_chunk = [&](int64_t ch, Chunk& c) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4* p = reinterpret_cast<const uint4*>(w.codes + row[mt][h] * words + ch * 8);
        c.q[mt][h][0] = live[mt][h] ? __ldg(p) : make_uint4(0, 0, 0, 0);
        c.q[mt][h][1] = live[mt][h] ? __ldg(p + 1) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k2 = 0; k2 < 2; ++k2) {
          const int64_t gi = live[mt][h] ? row[mt][h] * groups + (ch * 64 + k2 * 32) / w.group_size : 0;
          c.s[mt][h][k2] = scales[gi], c.b[mt][h][k2] = biases[gi];
        }
      }
  };
  Chunk cur, next;
  if (c0 < c1) load_chunk(c0, cur);
  wait_for_previous();
  allow_next();
  float acc[2][kNT][4] = {};
  for (int64_t ch = c0; ch < c1; ++ch) {
    if (ch + 1 < c1) load_chunk(ch + 1, next);
    __nv_bfloat162 s2[2][2][2], b2[2][2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int k2 = 0; k2 < 2; ++k2)
          s2[mt][h][k2] = __bfloat162bfloat162(cur.s[mt][h][k2]), b2[mt][h][k2] = __bfloat162bfloat162(cur.b[mt][h][k2]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t k = ch * 64 + j * 16 + 2 * c;
      uint32_t b0[kNT], b1[kNT];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int t = nt * 8 + g;
        b0[nt] = t < T ? *reinterpret_cast<const uint32_t*>(x + t * K + k) : 0u;
        b1[nt] = t < T ? *reinterpret_cast<const uint32_t*>(x + t * K + k + 8) : 0u;
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int k2 = j / 2;
        const unsigned a[4] = {widen_pair(word_of(cur.q[mt][0], 2 * j), sel, s2[mt][0][k2], b2[mt][0][k2]),
                               widen_pair(word_of(cur.q[mt][1], 2 * j), sel, s2[mt][1][k2], b2[mt][1][k2]),
                               widen_pair(word_of(cur.q[mt][0], 2 * j + 1), sel, s2[mt][0][k2], b2[mt][0][k2]),
                               widen_pair(word_of(cur.q[mt][1], 2 * j + 1), sel, s2[mt][1][k2], b2[mt][1][k2])};
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) tc::mma(acc[mt][nt], a, b0[nt], b1[nt]);
      }
    }
    cur = next;
  }
  float* out = part + int64_t(blockIdx.y) * T * N;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int t = nt * 8 + 2 * c + i % 2;
        const int h = i / 2;
        if (t < T && live[mt][h]) out[t * N + row[mt][h]] = acc[mt][nt][i];
      }
}

// out of each part of g [T, its rows] = the sum of part[0 .. splits)[t][n], in split order.
__global__ void qmma_sum_kernel(const float* __restrict__ part, int splits, int64_t T, int64_t N, StackedParts g) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * N) return;
  const int64_t t = i / N, n = i % N;
  float v = 0.0f;
  for (int s = 0; s < splits; ++s) v += part[s * T * N + i];
  const PartRow p = part_row(g, n);
  static_cast<float*>(p.out)[t * p.width + n - p.first] = v;
}

}  // namespace

bool qgemv(const float* x, const QuantizedMatrix& w, const StackedParts& g, int64_t T, int64_t K,
           cudaStream_t s) {
  if (T < 1 || T > kQgemvMaxTokens || (w.bits != 4 && w.bits != 8) || g.count < 1 ||
      g.count > StackedParts::kMaxParts)
    return false;
  const int per_word = 32 / w.bits;
  if (K % per_word != 0 || w.group_size % per_word != 0 || K % w.group_size != 0 ||
      !aligned16(x) || reinterpret_cast<uintptr_t>(w.codes) % 4 != 0)
    return false;
  if (w.bits == 4)
    dispatch_tokens<4>(x, int(T), w, g, K, s);
  else
    dispatch_tokens<8>(x, int(T), w, g, K, s);
  check_launch("qgemv");
  return true;
}

bool qmma_applies(const QuantizedMatrix& w, int64_t T, int64_t K) {
  return T > kQgemvMaxTokens && T <= kQmmaMaxTokens && w.bits == 4 && w.scale_dtype == DType::BF16 &&
         K % 64 == 0 && (w.group_size == 32 || w.group_size == 64 || w.group_size == 128) && aligned16(w.codes) &&
         compute_capability().first >= 8;
}

void qmma(const void* x16, const QuantizedMatrix& w, const StackedParts& g, int64_t T, int64_t K, float* part,
          int splits, cudaStream_t s) {
  const auto* x = static_cast<const __nv_bfloat16*>(x16);
  const int64_t N = g.rows_end[g.count - 1], chunks = K / 64, per_split = (chunks + splits - 1) / splits;
  const dim3 grid(unsigned((N + kMmaRows - 1) / kMmaRows), unsigned(splits)), block(kMmaWarps * 32);
  const int Ti = int(T);
  if (T <= 16) launch_dependent(qmma_kernel<2>, grid, block, 0, s, x, Ti, w, N, K, per_split, part);
  else if (T <= 32) launch_dependent(qmma_kernel<4>, grid, block, 0, s, x, Ti, w, N, K, per_split, part);
  else launch_dependent(qmma_kernel<8>, grid, block, 0, s, x, Ti, w, N, K, per_split, part);
  check_launch("qmma");
  const int64_t n = T * N;
  qmma_sum_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(part, splits, T, N, g);
  check_launch("qmma_sum");
}

int qmma_splits(int64_t N, int64_t K, int sms) {
  // Enough blocks for four a SM (each holds 32 rows a warp in flight), ranges of at least 4 chunks.
  const int64_t blocks = (N + kMmaRows - 1) / kMmaRows, chunks = K / 64;
  int64_t splits = (4 * sms + blocks - 1) / blocks;
  splits = splits < chunks / 4 ? splits : chunks / 4;
  return int(splits < 1 ? 1 : splits);
}

void widen(const QuantizedMatrix& w, const int32_t* ids, int64_t r0, int64_t R, int64_t L, float mul,
           void* out, DType out_dtype, cudaStream_t s) {
  const int64_t threads = R * ((L + 7) / 8);
  if (threads == 0) return;
  const dim3 grid(unsigned((threads + 255) / 256)), block(256);
  if (out_dtype == DType::BF16)
    widen_kernel<<<grid, block, 0, s>>>(w, ids, r0, R, L, mul, static_cast<__nv_bfloat16*>(out));
  else if (out_dtype == DType::F16)
    widen_kernel<<<grid, block, 0, s>>>(w, ids, r0, R, L, mul, static_cast<__half*>(out));
  else
    widen_kernel<<<grid, block, 0, s>>>(w, ids, r0, R, L, mul, static_cast<float*>(out));
  check_launch("widen");
}

}  // namespace tessera::cuda

// MLX-quantized weights kept as codes on the GPU (core/quantization.h's layout).
//  - qgemv: the decode products of 1-8 tokens read the codes once. One warp per output row; each
//    lane takes 16-byte pieces of the row's codes (32 4-bit or 16 8-bit weights, all of one
//    group), widens them to f32 in registers and multiplies them with each token's f32
//    activations. A code becomes a float without a conversion instruction: masked in place and
//    set into the mantissa of 2^23 it reads 2^23 + q * 2^(bits j), so one subtraction leaves q
//    scaled by a power of two, which the group's scale (divided by the same power) undoes.
//  - qmma: 9-64 tokens of 4-bit codes with bf16 scales on the tensor cores (mma.sync, sm_80+).
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

constexpr int kWarps = 8;  // rows per block of qgemv

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

// The group's scale divided by 2^(kBits j), for code j of a 16-bit half word (see the top).
template <int kBits>
struct PieceScales {
  static constexpr int kPerHalf = 16 / kBits;
  float s[kPerHalf];
  __device__ __forceinline__ explicit PieceScales(float scale) {
#pragma unroll
    for (int j = 0; j < kPerHalf; ++j) s[j] = scale * (1.0f / float(1u << (kBits * j)));
  }
};

// acc[t] += the 16-byte piece's weights (codes q, group scale and bias) · x[t][k0 ...].
template <int kBits, int kTokens>
__device__ __forceinline__ void piece_dot(const uint4& q, float scale, float bias,
                                          const float* __restrict__ x, int64_t ld, int T,
                                          float (&acc)[kTokens]) {
  constexpr int kPerHalf = 16 / kBits, kPerWord = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  const PieceScales<kBits> ps(scale);
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int wi = 0; wi < 4; ++wi) {
    float wv[kPerWord];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t half = h ? words[wi] >> 16 : words[wi];
#pragma unroll
      for (int j = 0; j < kPerHalf; ++j) {
        const float shifted = __int_as_float(int((half & (kMask << (kBits * j))) | 0x4B000000u)) - 8388608.0f;
        wv[h * kPerHalf + j] = fmaf(shifted, ps.s[j], bias);
      }
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= T) break;
      const float4* xp = reinterpret_cast<const float4*>(x + t * ld + wi * kPerWord);
#pragma unroll
      for (int i = 0; i < kPerWord / 4; ++i) {
        const float4 a = xp[i];
        acc[t] = fmaf(wv[4 * i], a.x, acc[t]);
        acc[t] = fmaf(wv[4 * i + 1], a.y, acc[t]);
        acc[t] = fmaf(wv[4 * i + 2], a.z, acc[t]);
        acc[t] = fmaf(wv[4 * i + 3], a.w, acc[t]);
      }
    }
  }
}

// out[t, n] = x[t] · w[n] for T <= kTokens tokens, w's rows numbered across g's parts (their codes,
// scales and biases consecutive, as upload_group stacks them; w holds the first part's). The first
// kPrefetch pieces of each lane are read before the previous kernel has finished (gemv.cu).
template <int kBits, int kTokens>
__global__ void __launch_bounds__(kWarps * 32)
    qgemv_kernel(const float* __restrict__ x, int T, QuantizedMatrix w, StackedParts g, int64_t rows,
                 int64_t K) {
  constexpr int kPerPiece = 128 / kBits, kPrefetch = 4;
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (n >= rows) return;
  const PartRow part = part_row(g, n);
  const int64_t pieces = K / kPerPiece, per_group = w.group_size / kPerPiece, groups = K / w.group_size;
  const uint4* codes = reinterpret_cast<const uint4*>(w.codes) + n * pieces;
  auto scale_at = [&](int64_t p) { return n * groups + p / per_group; };
  uint4 pre[kPrefetch];
#pragma unroll
  for (int i = 0; i < kPrefetch; ++i)
    if (lane + 32 * i < pieces) pre[i] = __ldg(codes + lane + 32 * i);
  wait_for_previous();
  allow_next();
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
#pragma unroll
  for (int i = 0; i < kPrefetch; ++i) {
    const int64_t p = lane + 32 * i;
    if (p < pieces) {
      const int64_t gi = scale_at(p);
      piece_dot<kBits, kTokens>(pre[i], load_as(w.scales, w.scale_dtype, gi),
                                load_as(w.biases, w.scale_dtype, gi), x + p * kPerPiece, K, T, acc);
    }
  }
#pragma unroll 2
  for (int64_t p = lane + 32 * kPrefetch; p < pieces; p += 32) {
    const uint4 q = __ldg(codes + p);
    const int64_t gi = scale_at(p);
    piece_dot<kBits, kTokens>(q, load_as(w.scales, w.scale_dtype, gi), load_as(w.biases, w.scale_dtype, gi),
                              x + p * kPerPiece, K, T, acc);
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = warp_sum(acc[t]);
  if (lane == 0) {
    float* out = static_cast<float*>(part.out);
    const int64_t N = part.width, row = n - part.first;
#pragma unroll
    for (int t = 0; t < kTokens; ++t)
      if (t < T) out[t * N + row] = acc[t];
  }
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
  auto load_chunk = [&](int64_t ch, uint4 (&q)[2][2][2]) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4* p = reinterpret_cast<const uint4*>(w.codes + row[mt][h] * words + ch * 8);
        q[mt][h][0] = live[mt][h] ? __ldg(p) : make_uint4(0, 0, 0, 0);
        q[mt][h][1] = live[mt][h] ? __ldg(p + 1) : make_uint4(0, 0, 0, 0);
      }
  };
  uint4 cur[2][2][2], next[2][2][2];
  if (c0 < c1) load_chunk(c0, cur);
  wait_for_previous();
  allow_next();
  float acc[2][kNT][4] = {};
  for (int64_t ch = c0; ch < c1; ++ch) {
    if (ch + 1 < c1) load_chunk(ch + 1, next);
    // The groups of the chunk's halves (groups are 32, 64 or 128 wide).
    __nv_bfloat162 s2[2][2][2], b2[2][2][2];  // [tile][half][chunk half]
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int k2 = 0; k2 < 2; ++k2) {
          const int64_t gi = live[mt][h] ? row[mt][h] * groups + (ch * 64 + k2 * 32) / w.group_size : 0;
          s2[mt][h][k2] = __bfloat162bfloat162(scales[gi]);
          b2[mt][h][k2] = __bfloat162bfloat162(biases[gi]);
        }
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
        const unsigned a[4] = {widen_pair(word_of(cur[mt][0], 2 * j), sel, s2[mt][0][k2], b2[mt][0][k2]),
                               widen_pair(word_of(cur[mt][1], 2 * j), sel, s2[mt][1][k2], b2[mt][1][k2]),
                               widen_pair(word_of(cur[mt][0], 2 * j + 1), sel, s2[mt][0][k2], b2[mt][0][k2]),
                               widen_pair(word_of(cur[mt][1], 2 * j + 1), sel, s2[mt][1][k2], b2[mt][1][k2])};
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) tc::mma(acc[mt][nt], a, b0[nt], b1[nt]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) cur[mt][h][0] = next[mt][h][0], cur[mt][h][1] = next[mt][h][1];
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

template <int kBits, int kTokens>
void launch_qgemv(const float* x, int T, const QuantizedMatrix& w, const StackedParts& g, int64_t K,
                  cudaStream_t s) {
  const int64_t rows = g.rows_end[g.count - 1];
  launch_dependent(qgemv_kernel<kBits, kTokens>, dim3(unsigned((rows + kWarps - 1) / kWarps)),
                   dim3(kWarps * 32), 0, s, x, T, w, g, rows, K);
}

template <int kBits>
void dispatch_tokens(const float* x, int T, const QuantizedMatrix& w, const StackedParts& g, int64_t K,
                     cudaStream_t s) {
  static_assert(kQgemvMaxTokens == 8, "token buckets 1, 2, 4, 8");
  if (T == 1)
    launch_qgemv<kBits, 1>(x, T, w, g, K, s);
  else if (T == 2)
    launch_qgemv<kBits, 2>(x, T, w, g, K, s);
  else if (T <= 4)
    launch_qgemv<kBits, 4>(x, T, w, g, K, s);
  else
    launch_qgemv<kBits, 8>(x, T, w, g, K, s);
}

}  // namespace

bool qgemv(const float* x, const QuantizedMatrix& w, const StackedParts& g, int64_t T, int64_t K,
           cudaStream_t s) {
  if (T < 1 || T > kQgemvMaxTokens || (w.bits != 4 && w.bits != 8) || g.count < 1 ||
      g.count > StackedParts::kMaxParts)
    return false;
  const int per_piece = 128 / w.bits;
  if (K % per_piece != 0 || w.group_size % per_piece != 0 || K % w.group_size != 0 || !aligned16(x) ||
      !aligned16(w.codes))
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

int qmma_splits(const QuantizedMatrix& w, int64_t N, int64_t K, int sms) {
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

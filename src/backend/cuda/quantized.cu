// MLX-quantized weights kept as codes on the GPU (core/quantization.h's layout).
//  - qgemv: the decode products of 1-2 tokens where qmma does not apply (other group sizes or
//    shapes) read the codes once. A warp takes 2 or 4 rows; lane l reads words l,
//    l + 32, ... of each (8 4-bit or 4 8-bit codes), so that the activations of a word are read
//    once for the warp's rows and its 32 lanes read them contiguously. A code becomes a float
//    without a conversion instruction: masked in place and set into the mantissa of 2^23 it
//    reads 2^23 + q * 2^(bits j), so one subtraction leaves q scaled by a power of two, which the
//    group's scale (divided by the same power) undoes.
//  - qmma (quantized_mma.cu): 1-64 tokens of 4- or 8-bit codes with bf16 or f16 scales on the
//    tensor cores.
//  - widen: any width and group size, weights (or a table's gathered rows) rewritten as f32 or
//    16-bit values, for the products of more tokens (then the 16-bit paths run) and embeddings.
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
// kPrefetch words of each row are read before the previous kernel has finished.
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

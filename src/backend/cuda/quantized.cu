// MLX-quantized weights kept as codes on the GPU (core/quantization.h's layout).
//  - qgemv: the decode products of 1-8 tokens read the codes once. One warp per output row; each
//    lane takes 16-byte pieces of the row's codes (32 4-bit or 16 8-bit weights, all of one
//    group), widens them to f32 in registers and multiplies them with each token's f32
//    activations. A code becomes a float without a conversion instruction: masked in place and
//    set into the mantissa of 2^23 it reads 2^23 + q * 2^(bits j), so one subtraction leaves q
//    scaled by a power of two, which the group's scale (divided by the same power) undoes.
//  - widen: any width and group size, weights (or a table's gathered rows) rewritten as f32 or
//    16-bit values, for the products of more tokens (then the 16-bit paths run) and embeddings.
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

// Matrix-vector products for few tokens (decode): out[T, N] = x[T, K] · w[N, K]ᵀ with 16-bit
// weights and f32 activations, read once at memory speed. One warp per output row; each lane
// reads 16 bytes (8 weights) at a time, so a warp streams 512 contiguous bytes per step, and
// multiplies them with each token's activations (small, served from L1/L2). The activations
// stay f32, so this is also more exact than the GEMM path, which rounds them to 16 bits.
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ void unpack8(const uint4& raw, const __nv_bfloat16*, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}
__device__ __forceinline__ void unpack8(const uint4& raw, const __half*, float* f) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 v = __half22float2(h[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}

template <class W, int kTokens>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_kernel(const float* __restrict__ x,
                                                                   const W* __restrict__ w, float* __restrict__ out,
                                                                   int64_t N, int64_t K) {
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;
  const W* wr = w + n * K;
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
#pragma unroll 4
  for (int64_t k = lane * 8; k < K; k += 256) {
    uint4 raw = __ldg(reinterpret_cast<const uint4*>(wr + k));
    float wf[8];
    unpack8(raw, wr, wf);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float4* xp = reinterpret_cast<const float4*>(x + t * K + k);
      float4 a = xp[0], b = xp[1];
      acc[t] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x + wf[5] * b.y + wf[6] * b.z +
                wf[7] * b.w;
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    float v = warp_sum(acc[t]);
    if (lane == 0) out[t * N + n] = v;
  }
}

template <class W, int kTokens>
void launch(const float* x, const W* w, float* out, int64_t N, int64_t K, cudaStream_t s) {
  gemv_kernel<W, kTokens><<<unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock), kWarpsPerBlock * 32, 0, s>>>(
      x, w, out, N, K);
}

template <class W>
void dispatch(const float* x, const W* w, float* out, int64_t T, int64_t N, int64_t K, cudaStream_t s) {
  static_assert(kGemvMaxTokens == 2, "one instantiation per token count");
  if (T == 1) launch<W, 1>(x, w, out, N, K, s);
  else launch<W, 2>(x, w, out, N, K, s);
}

}  // namespace

bool gemv(const float* x, const void* w, DType dt, float* out, int64_t T, int64_t N, int64_t K, cudaStream_t s) {
  bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (T < 1 || T > kGemvMaxTokens || K % 8 != 0 || !aligned || (dt != DType::BF16 && dt != DType::F16)) return false;
  if (dt == DType::BF16) dispatch(x, static_cast<const __nv_bfloat16*>(w), out, T, N, K, s);
  else dispatch(x, static_cast<const __half*>(w), out, T, N, K, s);
  check_launch("gemv");
  return true;
}

}  // namespace tessera::cuda

// Matrix-vector products for few tokens (decode): out[T, N] = x[T, K] · w[N, K]ᵀ with 16-bit
// weights and f32 activations, read once at memory speed, for up to 4 matrices that share x in
// one launch (their rows numbered one after another). One warp per output row; each lane
// reads 16 bytes (8 weights) at a time, so a warp streams 512 contiguous bytes per step, and
// multiplies them with each token's activations (small, served from L1/L2). The activations
// stay f32, so this is also more exact than the GEMM path, which rounds them to 16 bits.
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

template <class W, int kTokens>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_kernel(const float* __restrict__ x, StackedParts g,
                                                                   int64_t K) {
  int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  // The part this row belongs to, with constant indices only (a computed index into the
  // parameter array would copy it to local memory).
  const void* w = g.w[0];
  float* out = static_cast<float*>(g.out[0]);
  int64_t first = 0, N = g.rows_end[0];
#pragma unroll
  for (int p = 1; p < StackedParts::kMaxParts; ++p)
    if (p < g.count && n >= g.rows_end[p - 1])
      w = g.w[p], out = static_cast<float*>(g.out[p]), first = g.rows_end[p - 1], N = g.rows_end[p] - first;
  n -= first;
  if (n >= N) return;  // past the last part
  const W* wr = static_cast<const W*>(w) + n * K;
  // The first kPrefetch pieces of the row are read before the previous kernel (which writes x)
  // has finished: launched as its programmatic dependent, this kernel streams weights while the
  // small kernels before it (norm, attention, silu) run.
  constexpr int kPrefetch = 4;
  uint4 pre[kPrefetch];
#pragma unroll
  for (int p = 0; p < kPrefetch; ++p)
    if (lane * 8 + p * 256 < K) pre[p] = __ldg(reinterpret_cast<const uint4*>(wr + lane * 8 + p * 256));
  wait_for_previous();
  allow_next();
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
  auto accumulate = [&](const float* wf, int64_t k) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float4* xp = reinterpret_cast<const float4*>(x + t * K + k);
      float4 a = xp[0], b = xp[1];
      acc[t] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x + wf[5] * b.y + wf[6] * b.z +
                wf[7] * b.w;
    }
  };
#pragma unroll
  for (int p = 0; p < kPrefetch; ++p)
    if (lane * 8 + p * 256 < K) {
      float wf[8];
      unpack8(pre[p], wr, wf);
      accumulate(wf, lane * 8 + p * 256);
    }
#pragma unroll 4
  for (int64_t k = lane * 8 + kPrefetch * 256; k < K; k += 256) {
    float wf[8];
    load8(wr + k, wf);
    accumulate(wf, k);
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    float v = warp_sum(acc[t]);
    if (lane == 0) out[t * N + n] = v;
  }
}

template <class W, int kTokens>
void launch(const float* x, const StackedParts& g, int64_t K, cudaStream_t s) {
  const int64_t rows = g.rows_end[g.count - 1];
  launch_dependent(gemv_kernel<W, kTokens>, dim3(unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock)),
                   dim3(kWarpsPerBlock * 32), 0, s, x, g, K);
}

template <class W>
void dispatch(const float* x, const StackedParts& g, int64_t T, int64_t K, cudaStream_t s) {
  static_assert(kGemvMaxTokens == 2, "one instantiation per token count");
  if (T == 1) launch<W, 1>(x, g, K, s);
  else launch<W, 2>(x, g, K, s);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gemv(const float* x, const StackedParts& g, DType dt, int64_t T, int64_t K, cudaStream_t s) {
  bool ok = T >= 1 && T <= kGemvMaxTokens && K % 8 == 0 && aligned16(x) && (dt == DType::BF16 || dt == DType::F16) &&
            g.count >= 1 && g.count <= StackedParts::kMaxParts;
  for (int p = 0; ok && p < g.count; ++p) ok = aligned16(g.w[p]);
  if (!ok) return false;
  if (dt == DType::BF16) dispatch<__nv_bfloat16>(x, g, T, K, s);
  else dispatch<__half>(x, g, T, K, s);
  check_launch("gemv");
  return true;
}

}  // namespace tessera::cuda

// Matrix-vector products for few tokens (decode): out[T, N] = x[T, K] · w[N, K]ᵀ with 16-bit
// weights and f32 activations, read once at memory speed, for up to 4 matrices that share x in
// one launch (their rows numbered one after another). One warp per output row; each lane
// reads 16 bytes (8 weights) at a time, so a warp streams 512 contiguous bytes per step, and
// multiplies them with each token's activations (small, served from L1/L2). The activations
// stay f32, so this is also more exact than the GEMM path, which rounds them to 16 bits.
// The MLP's form (gemv_glu) gives each warp row n of gate and of up, read side by side (each
// activation load serves both), and writes only act(gate) * up.
// Two more forms (GemvForm) save the decoder's add + norm kernels between products: x taken as
// rms_norm(x) with a unit weight (the norm's weight folded into the products' weights), each warp
// summing the squares of the x it reads anyway; and the output added into out (the residual).
#include <algorithm>

#include "backend/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"

namespace tessera::cuda {
namespace {

// Warps (rows) per block. Measured on the H200 (8B shapes, decode tok/s, three rounds): one token
// 224 with 8 against 223 with 4 and 220 with 16; two tokens 384-385 with 4 against 377-378 with 8.
template <int kTokens>
constexpr int kWarpsPerBlock = kTokens == 1 ? 8 : 4;

// One token's kernels are held to 4 blocks an SM, 64 registers (0: no bound). Unbounded, they
// take 36-46 registers and 5-7 blocks an SM, and alone o ran about 40% and down 12% slower.
template <int kTokens>
constexpr int kMinBlocks = kTokens == 1 ? 4 : 0;

// acc[r][t] = this lane's share of row r · x[t] (warp_sum gives the whole), for kRows rows of K
// weights (16-byte aligned) and kTokens tokens, token t's activations at x + t * ld. Launched as
// the previous kernel's programmatic dependent, the kernel starts early but reads nothing until
// that kernel (which writes x) has finished: weights read ahead took bandwidth from its last rows,
// which the step waits for, and registers that cost a block an SM. bench_cuda decode tok/s on an
// H100 (8B shapes, rounds interleaved), each row's first 4 pieces read ahead / 1 / none: batch 1
// 179.2-179.5 / 182.0-182.2 / 183.6-183.7 (one-token kernels at 4 blocks an SM, where 4 pieces had
// left gate/up and half-rows at 3); on another, 4 / none: batch 1 182.4-182.8 / 187.2-187.5,
// batch 2 333.9-335.0 / 338.7-339.1.
// With kSquares, sq[t] = this lane's share of x[t] · x[t] over the same k. With old,
// old_values[t] = old[t * old_ld], read after the wait (the residual that an add form adds to).
template <class W, int kTokens, int kRows, bool kSquares = false>
__device__ __forceinline__ void dot_rows(const float* __restrict__ x, int64_t ld, const W* const (&wr)[kRows],
                                         int64_t K, float (&acc)[kRows][kTokens], float (&sq)[kTokens],
                                         const float* old = nullptr, int64_t old_ld = 0,
                                         float* old_values = nullptr) {
  const int lane = threadIdx.x % 32;
  wait_for_previous();
  allow_next();
  if (old)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) old_values[t] = old[t * old_ld];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    sq[t] = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r][t] = 0.0f;
  }
#pragma unroll 4
  for (int64_t k = lane * 8; k < K; k += 256) {
    float wf[kRows][8];
#pragma unroll
    for (int r = 0; r < kRows; ++r) load8(wr[r] + k, wf[r]);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float4* xp = reinterpret_cast<const float4*>(x + t * ld + k);
      float4 a = xp[0], b = xp[1];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][t] += dot8(wf[r], a, b);
      if constexpr (kSquares)
        sq[t] +=
            a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
    }
  }
}

// The scale of rms_norm(x[t]) from the squares' sum over its K elements.
__device__ __forceinline__ float inv_rms(float squares, int64_t K, float eps) {
  return rsqrtf(squares / float(K) + eps);
}

// With kSplit 2, two warps of a block share a row, each taking one half of its k (K a multiple of
// 16), the halves' sums added in a fixed order: a grid of rows that would leave its last wave
// mostly empty (an 8B's q/k/v: 1.45 waves of rows on an H200) takes fewer whole waves of half-rows.
// kNormed: x taken as rms_norm(x) (unit weight, eps); kAdd: out += the product.
template <class W, int kTokens, int kSplit, bool kNormed, bool kAdd>
__global__ void __launch_bounds__(kWarpsPerBlock<kTokens> * 32, kMinBlocks<kTokens>)
    gemv_kernel(const float* __restrict__ x, StackedParts g, int64_t K, float eps) {
  static_assert(kSplit == 1 || kSplit == 2, "a row in one or two halves");
  constexpr int kRowsPerBlock = kWarpsPerBlock<kTokens> / kSplit;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, half = warp % kSplit;
  int64_t n = int64_t(blockIdx.x) * kRowsPerBlock + warp / kSplit;
  const PartRow part = part_row(g, n);
  float* out = static_cast<float*>(part.out);
  const int64_t N = part.width;
  n -= part.first;
  const bool row = n < N;  // else past the last part
  if (kSplit == 1 && !row) return;
  const int64_t Kh = K / kSplit;
  float acc[1][kTokens] = {}, sq[kTokens] = {}, old[kTokens] = {};
  if (row) {
    const W* wr[1] = {static_cast<const W*>(part.w) + n * K + half * Kh};
    const bool reads_old = kAdd && half == 0 && lane == 0;
    dot_rows<W, kTokens, 1, kNormed>(x + half * Kh, K, wr, Kh, acc, sq, reads_old ? out + n : nullptr, N,
                                     old);
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    acc[0][t] = warp_sum(acc[0][t]);
    if constexpr (kNormed) sq[t] = warp_sum(sq[t]);
  }
  // The row's sums (and, normed, each half's squares) in a fixed order.
  if constexpr (kSplit == 2) {
    __shared__ float second[kRowsPerBlock][kTokens][2];
    if (half == 1 && lane == 0)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) second[warp / 2][t][0] = acc[0][t], second[warp / 2][t][1] = sq[t];
    __syncthreads();
    if (half == 1) return;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[0][t] += second[warp / 2][t][0], sq[t] += second[warp / 2][t][1];
  }
  if (lane == 0 && row)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float v = kNormed ? acc[0][t] * inv_rms(sq[t], K, eps) : acc[0][t];
      out[t * N + n] = kAdd ? old[t] + v : v;
    }
}

// out[t, n] = act(gate row n · x[t] + gate bias) * (up row n · x[t] + up bias), one warp per n.
template <class W, int kTokens, bool kGelu, bool kNormed>
__global__ void __launch_bounds__(kWarpsPerBlock<kTokens> * 32, kMinBlocks<kTokens>)
    gemv_glu_kernel(const float* __restrict__ x, GatedPair g, int64_t K, float* __restrict__ out, float eps) {
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock<kTokens> + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= g.N) return;
  const W* wr[2] = {static_cast<const W*>(g.gate) + n * K, static_cast<const W*>(g.up) + n * K};
  float acc[2][kTokens], sq[kTokens];
  dot_rows<W, kTokens, 2, kNormed>(x, K, wr, K, acc, sq);
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    acc[0][t] = warp_sum(acc[0][t]), acc[1][t] = warp_sum(acc[1][t]);
    if constexpr (kNormed) {
      const float r = inv_rms(warp_sum(sq[t]), K, eps);
      acc[0][t] *= r, acc[1][t] *= r;
    }
  }
  if (lane == 0) {
    const float gb = g.gate_bias ? to_f32(static_cast<const W*>(g.gate_bias)[n]) : 0.0f;
    const float ub = g.up_bias ? to_f32(static_cast<const W*>(g.up_bias)[n]) : 0.0f;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) out[t * g.N + n] = glu_times<kGelu>(acc[0][t] + gb, acc[1][t] + ub);
  }
}

// Rows (warps) of gemv_kernel<W, kTokens, 1> the GPU holds at once.
template <class W, int kTokens>
int64_t rows_a_wave() {
  static const int64_t rows = [] {
    int dev = 0, sms = 0, blocks = 0;
    check(cudaGetDevice(&dev), "gemv device");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "gemv SM count");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, gemv_kernel<W, kTokens, 1, false, false>,
                                                        kWarpsPerBlock<kTokens> * 32, 0),
          "gemv occupancy");
    return int64_t(sms) * std::max(blocks, 1) * kWarpsPerBlock<kTokens>;
  }();
  return rows;
}

template <class W, int kTokens, int kSplit>
void launch_form(const float* x, const StackedParts& g, int64_t K, GemvForm f, dim3 grid, dim3 block,
                 cudaStream_t s) {
  if (f.kind == GemvForm::Normed)
    launch_dependent(gemv_kernel<W, kTokens, kSplit, true, false>, grid, block, 0, s, x, g, K, f.eps);
  else if (f.kind == GemvForm::Add)
    launch_dependent(gemv_kernel<W, kTokens, kSplit, false, true>, grid, block, 0, s, x, g, K, 0.0f);
  else
    launch_dependent(gemv_kernel<W, kTokens, kSplit, false, false>, grid, block, 0, s, x, g, K, 0.0f);
}

template <class W, int kTokens>
void launch(const float* x, const StackedParts& g, int64_t K, GemvForm f, cudaStream_t s) {
  const int64_t rows = g.rows_end[g.count - 1], wave = rows_a_wave<W, kTokens>();
  // Half-rows where their whole waves take under 0.8 of the rows' time. Measured on the H200 (8B
  // q/k/v, 2 waves of rows or 3 of half-rows): 14.8 µs against 16.2 alone, decode batch 1 / 2
  // 239.9 / 397.4 tok/s against 239.0 / 395.5 (three rounds).
  const int64_t whole = (rows + wave - 1) / wave, halves = (2 * rows + wave - 1) / wave;
  const bool split = K % 16 == 0 && 5 * halves < 8 * whole;
  constexpr int warps = kWarpsPerBlock<kTokens>;
  const int per_block = split ? warps / 2 : warps;
  const dim3 grid(unsigned((rows + per_block - 1) / per_block)), block(warps * 32);
  if (split)
    launch_form<W, kTokens, 2>(x, g, K, f, grid, block, s);
  else
    launch_form<W, kTokens, 1>(x, g, K, f, grid, block, s);
}

template <class W, int kTokens, bool kGelu>
void launch_glu(const float* x, const GatedPair& g, int64_t K, float* out, GemvForm f, cudaStream_t s) {
  constexpr int warps = kWarpsPerBlock<kTokens>;
  const dim3 grid(unsigned((g.N + warps - 1) / warps)), block(warps * 32);
  if (f.kind == GemvForm::Normed)
    launch_dependent(gemv_glu_kernel<W, kTokens, kGelu, true>, grid, block, 0, s, x, g, K, out, f.eps);
  else
    launch_dependent(gemv_glu_kernel<W, kTokens, kGelu, false>, grid, block, 0, s, x, g, K, out, 0.0f);
}

template <class W, int kTokens>
void launch(const float* x, const GatedPair& g, int64_t K, float* out, Glu act, GemvForm f, cudaStream_t s) {
  if (act == Glu::GeGLU)
    launch_glu<W, kTokens, true>(x, g, K, out, f, s);
  else
    launch_glu<W, kTokens, false>(x, g, K, out, f, s);
}

// launch<W, T>(args...) for the weights' dtype and the token count.
template <class... A>
void dispatch(DType dt, int64_t T, const A&... args) {
  static_assert(kGemvMaxTokens == 2, "one instantiation per token count");
  if (dt == DType::BF16) {
    if (T == 1) launch<__nv_bfloat16, 1>(args...);
    else launch<__nv_bfloat16, 2>(args...);
  } else {
    if (T == 1) launch<__half, 1>(args...);
    else launch<__half, 2>(args...);
  }
}

// Whether the GEMV applies to x [T, K] and 16-bit weights of `dt`.
bool applies(const float* x, DType dt, int64_t T, int64_t K) {
  return T >= 1 && T <= kGemvMaxTokens && K % 8 == 0 && aligned16(x) && (dt == DType::BF16 || dt == DType::F16);
}

}  // namespace

bool gemv(const float* x, const StackedParts& g, DType dt, int64_t T, int64_t K, cudaStream_t s,
          GemvForm form) {
  bool ok = applies(x, dt, T, K) && g.count >= 1 && g.count <= StackedParts::kMaxParts;
  for (int p = 0; ok && p < g.count; ++p) ok = aligned16(g.w[p]);
  if (!ok) return false;
  dispatch(dt, T, x, g, K, form, s);
  check_launch("gemv");
  return true;
}

bool gemv_glu(Glu act, const float* x, const GatedPair& g, DType dt, int64_t T, int64_t K, float* out,
              cudaStream_t s, GemvForm form) {
  if (form.kind == GemvForm::Add || !applies(x, dt, T, K) || !aligned16(g.gate) || !aligned16(g.up))
    return false;
  if (g.N > 0) dispatch(dt, T, x, g, K, out, act, form, s);
  check_launch("gemv_glu");
  return true;
}

}  // namespace tessera::cuda

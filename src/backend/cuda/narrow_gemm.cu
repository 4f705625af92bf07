// Matrix products for decode batches of 17-64 tokens on Hopper: out = x[T, K] · w[N, K]ᵀ with
// 16-bit weights and x, accumulated in f32. Still bound by reading the weights once, but
// cuBLASLt's kernels for these shapes stream them at 1.8-3.4 TB/s of the 4.3 a copy reaches (the
// narrow q/k/v and o, the long down), and its split-k runs a reduction kernel of its own. Here:
//  - outᵀ = w · xᵀ on the warpgroup tensor cores: a block of one warpgroup takes up to 128
//    weight rows (two 64-row wgmma tiles) by 32 or 64 token columns, k in 64-wide chunks through
//    a cp.async ring (skinny_gemm.cu's layout, two chunks a stage at 32 columns);
//  - the rows are spread evenly over as many blocks as run at once, so that every SM streams
//    as many bytes (128-row tiles left an 8B's q/k/v 96 blocks on 132 SMs, and a Qwen3-4B's
//    gate/up 152);
//  - a product over k ranges (splits) writes each range's sums as its own f32 array: the
//    kernel after it (the residual add + norm, rope + store) adds them, so no pass of its own;
//  - the MLP's form gives each block up to 64 rows of gate and the same rows of up, whose sums
//    meet in one thread: it writes act(gate) * up, with no glu kernel after.
#include <algorithm>
#include <type_traits>

#include "backend/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/device_types.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/wgmma.cuh"

namespace tessera::cuda {
namespace {

constexpr int kMaxSplits = 8;
// Ring stages, and chunks a stage. The plain form at 64 tokens: six stages of one chunk, one block
// an SM (145 KB), measured on the H200 with 128-row tiles (bench_cuda, 8B, batch 32 / 64 tok/s,
// each beside six in one run): six 6,176 / 10,046 against four (two blocks an SM) 5,975 / 9,656
// and three 5,633 / 9,078; six 6,131 / 9,960 against eight 6,085 / 9,911. At 32 tokens: four
// stages of two chunks (161 KB), a weight line's 256 bytes requested back to back: batch 24 / 32
// +1.0-2.0% against six of one (two runs); at 64 tokens no gain. The MLP form: four of one, two
// blocks an SM, so that its row groups (at most 64 rows of gate and of up, which meet in one tile)
// cover an 8B's F = 14,336 in one wave of blocks.
template <int kN, bool kGlu>
constexpr int kChunksFor = !kGlu && kN == 32 ? 2 : 1;
template <int kN, bool kGlu>
constexpr int kStagesFor = kGlu || kChunksFor<kN, kGlu> == 2 ? 4 : 6;

// Shared memory of the form's ring, + 1 KB for alignment.
template <int kN, bool kGlu>
constexpr size_t kSmemBytes = kStagesFor<kN, kGlu> * TileStage<kN, kChunksFor<kN, kGlu>>::bytes + 1024;

// Grid (splits, row groups). Plain form (kGlu false): block (q, g) multiplies row group g of w
// [N, K] over k range q, into out + q T N ([T, N], f32). MLP form: w is gate [N, K] with up
// [N, K] right after it; block (0, g) takes row group g of both over all of k and writes
// act(gate) * up into out [T, N].
template <class W, int kN, bool kGlu, bool kGelu, class O>
__global__ void __launch_bounds__(kTileThreads)
    narrow_gemm_kernel(const W* __restrict__ x, const W* __restrict__ w, int T, int64_t K, int64_t N,
                       O* __restrict__ out) {
#ifdef TESSERA_WGMMA
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);  // swizzle atoms are 1 KB aligned

  const int split = blockIdx.x, splits = gridDim.x, tid = threadIdx.x;
  const int64_t chunks = K / kTileChunk;
  const int64_t c_begin = split * chunks / splits, count = (split + 1) * chunks / splits - c_begin;
  // This block's rows [r0, r1), an even share of N: tile line l holds row r0 + l, or in the MLP
  // form gate's (l < 64) or up's row r0 + l % 64.
  const int64_t r0 = int64_t(blockIdx.y) * N / gridDim.y, r1 = int64_t(blockIdx.y + 1) * N / gridDim.y;
  auto row_of = [&](int l) { return r0 + (kGlu ? l % 64 : l); };

  // This thread's weight lines tid / 8 + 16 i (tile_products).
  const W* src[8];
  bool live[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int l = tid / 8 + 16 * i;
    const int64_t n = row_of(l);
    live[i] = n < r1;
    src[i] = w + (kGlu && l >= 64 ? N * K : 0) + (live[i] ? n : r0) * K;  // rows past r1 zero-filled
  }
  float acc[2][kN / 2];
  tile_products<W, kN, kStagesFor<kN, kGlu>, kChunksFor<kN, kGlu>>(smem, src, live, x, T, K, c_begin, count, acc);

  for_each_acc<kN, kGlu ? 1 : 2>([&](int m, int e, int l, int t) {
    const int64_t n = row_of(l);
    if (n >= r1 || t >= T) return;
    if constexpr (kGlu) out[t * N + n] = from_f32<O>(glu_times<kGelu>(acc[0][e], acc[1][e]));
    else out[(int64_t(split) * T + t) * N + n] = acc[m][e];
  });
#endif
}

// Blocks of the kernel that run at once on the GPU (its shared-memory limit set on first use).
template <class W, int kN, bool kGlu, bool kGelu, class O>
int resident_blocks() {
  static const int blocks = [] {
    auto kernel = narrow_gemm_kernel<W, kN, kGlu, kGelu, O>;
    constexpr size_t bytes = kSmemBytes<kN, kGlu>;
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
          "narrow gemm shared memory");
    int dev = 0, sms = 0, per_sm = 0;
    check(cudaGetDevice(&dev), "narrow gemm device");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "narrow gemm SM count");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTileThreads, bytes),
          "narrow gemm occupancy");
    return sms * std::max(per_sm, 1);
  }();
  return blocks;
}

template <class W, int kN, bool kGlu, bool kGelu, class O>
void launch(const void* x, const void* w, int64_t T, int64_t N, int64_t K, int splits, void* out, cudaStream_t s) {
  const int resident = resident_blocks<W, kN, kGlu, kGelu, O>();  // also sets the shared-memory limit
  // Row groups: enough for at most 128 rows each (64 in the MLP form), and more, up to one wave
  // of blocks with the k ranges, while each keeps at least 16 rows.
  const int64_t fewest = kGlu ? (N + 63) / 64 : (N + kTileRows - 1) / kTileRows;
  const int64_t groups = std::max(fewest, std::min<int64_t>(resident / splits, (N + 15) / 16));
  launch_dependent(narrow_gemm_kernel<W, kN, kGlu, kGelu, O>, dim3(unsigned(splits), unsigned(groups)),
                   dim3(kTileThreads), kSmemBytes<kN, kGlu>, s, static_cast<const W*>(x), static_cast<const W*>(w),
                   int(T), K, N, static_cast<O*>(out));
}

// launch<W, kN, ...>(args...) for the weights' dtype and the token count; out f32 with kF32Out, else
// of the weights' dtype.
template <bool kGlu, bool kGelu, bool kF32Out, class... A>
void dispatch(DType dt, int64_t T, const A&... args) {
  if (dt == DType::BF16) {
    using O = std::conditional_t<kF32Out, float, __nv_bfloat16>;
    if (T <= 32) launch<__nv_bfloat16, 32, kGlu, kGelu, O>(args...);
    else launch<__nv_bfloat16, 64, kGlu, kGelu, O>(args...);
  } else {
    using O = std::conditional_t<kF32Out, float, __half>;
    if (T <= 32) launch<__half, 32, kGlu, kGelu, O>(args...);
    else launch<__half, 64, kGlu, kGelu, O>(args...);
  }
}

// TESSERA_CUDA_NARROW_GEMM=0 leaves these products to cuBLASLt, for side-by-side measurements.
bool enabled() {
  static const bool yes = !switched_off("TESSERA_CUDA_NARROW_GEMM");
  return yes;
}

}  // namespace

bool narrow_gemm_applies(const void* x, const void* w, DType dtype, int64_t T, int64_t K) {
  return enabled() && sm90a_runs() && T >= kNarrowMinTokens && T <= kNarrowMaxTokens && K % kTileChunk == 0 &&
         (dtype == DType::BF16 || dtype == DType::F16) && aligned16(x) && aligned16(w);
}

int narrow_gemm_splits(int64_t T, int64_t N, int64_t K, DType dtype) {
  const int64_t tiles = (N + kTileRows - 1) / kTileRows, chunks = K / kTileChunk;
  const int resident = dtype == DType::BF16
                           ? (T <= 32 ? resident_blocks<__nv_bfloat16, 32, false, false, float>()
                                      : resident_blocks<__nv_bfloat16, 64, false, false, float>())
                           : (T <= 32 ? resident_blocks<__half, 32, false, false, float>()
                                      : resident_blocks<__half, 64, false, false, float>());
  // As many k ranges as fill the resident blocks in one wave, each at least 4 chunks long. An
  // 8B on the H200 (132 blocks): q/k/v 2, o and down 4. The same count forced on all three
  // (128-row tiles; bench_cuda --breakdown, batch 32 and 64): 2 left o and down 18-35% slower, 3 q/k/v
  // 31-32%, 6 all three 18-36%.
  return int(std::clamp<int64_t>(resident / tiles, 1, std::min<int64_t>(kMaxSplits, std::max<int64_t>(chunks / 4, 1))));
}

void narrow_gemm(const void* x, const void* w, DType dtype, int64_t T, int64_t N, int64_t K, int splits, float* out,
                 cudaStream_t s) {
  dispatch<false, false, true>(dtype, T, x, w, T, N, K, splits, static_cast<void*>(out), s);
  check_launch("narrow gemm");
}

void narrow_gemm_glu(Glu act, const void* x, const void* gate_up, DType dtype, int64_t T, int64_t F, int64_t K,
                     void* out, DType out_dtype, cudaStream_t s) {
  const bool f32 = out_dtype == DType::F32;
  if (act == Glu::GeGLU) {
    if (f32) dispatch<true, true, true>(dtype, T, x, gate_up, T, F, K, 1, out, s);
    else dispatch<true, true, false>(dtype, T, x, gate_up, T, F, K, 1, out, s);
  } else {
    if (f32) dispatch<true, false, true>(dtype, T, x, gate_up, T, F, K, 1, out, s);
    else dispatch<true, false, false>(dtype, T, x, gate_up, T, F, K, 1, out, s);
  }
  check_launch("narrow gemm glu");
}

}  // namespace tessera::cuda

// Matrix products through cuBLASLt: out[T, N] = a[T, K] · w[N, K]ᵀ, with a and w of one dtype
// (f32, bf16 or f16), accumulating in f32; out is f32 or (for 16-bit operands) of their dtype. f32 runs as true f32 (no TF32), so that f32
// models give what the CPU gives. One plan (layouts + algorithm) is kept per shape; for the
// 16-bit products of up to kTunedTokens tokens (decode batches, which repeat every step) the
// algorithm is the fastest of cuBLASLt's candidates, timed once for each power-of-two bucket of
// token counts at its top count and used for all its counts (a server's batch size changes every
// few steps; timing each new one would stall it for milliseconds). The runner pads recorded
// decode steps to a power of two, so they run at the count their choice was timed for, whichever
// count of the bucket came first (timed at 48 instead, batch 64 ran 9% slower on the H200).
//
// A product may also run as `splits` products over equal k ranges, each writing its partial sum
// (a strided batch): the caller sums them in a pass it makes anyway (the residual add), in place
// of cuBLASLt's own split-k reduction kernel. splits() says for which shapes that is faster, as
// timed the same way; TESSERA_CUDA_SPLIT_K=N fixes the count at N where k divides (1: never
// split), for tests and side-by-side measurements.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <limits>
#include <map>
#include <tuple>

#include "core/dtype.h"

namespace tessera::cuda {

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // splits > 1: out is [splits, T, N], part s the product over k range s (K / splits wide).
  void run(const void* a, const void* w, DType dtype, void* out, DType out_dtype, int64_t T, int64_t N, int64_t K,
           int splits = 1);
  // The number of k ranges (1, 2, 4 or 8) at which run() of this 16-bit shape with f32 partial
  // sums is fastest: 1 past the tuned token counts, and while the stream is being recorded for a
  // bucket not yet timed.
  int splits(const void* a, const void* w, DType dtype, int64_t T, int64_t N, int64_t K);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // dtype, out dtype, T, N, K, alignment of the three pointers (cuBLASLt picks kernels by
  // alignment), k ranges
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int, int, int, int>;
  struct Timed {
    cublasLtMatmulAlgo_t algo{};
    float ms = std::numeric_limits<float>::infinity();  // the bucket's top count from a cold L2; infinite: untimed
  };
  // w: the first call's weights, for timing the candidates.
  const Plan& plan(const Key& key, const void* w);
  void layouts(const Key& key, Plan& p) const;
  int candidates(const Key& key, const Plan& p, cublasLtMatmulHeuristicResult_t* out, int most) const;
  Timed timed_choice(const Key& bucket, cublasLtMatmulDesc_t desc, const void* w);
  static Key bucket_of(Key key);
  static constexpr int64_t kTunedTokens = 512;
  static constexpr int kCandidates = 8;
  static constexpr int64_t kMinSplitK = 64;  // the shortest k range splits() considers

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = size_t(32) << 20;
  int forced_splits_ = 0;  // TESSERA_CUDA_SPLIT_K; 0: timed
  std::map<Key, Plan> plans_;
  std::map<Key, Timed> tuned_;  // by the key with T rounded up to a power of two (bucket_of)
  std::map<Key, int> splits_;   // by the bucket with k ranges 0
};

}  // namespace tessera::cuda

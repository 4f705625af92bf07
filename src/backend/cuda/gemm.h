// Matrix products through cuBLASLt: out[T, N] = a[T, K] · w[N, K]ᵀ, with a and w of one dtype
// (f32, bf16 or f16), accumulating in f32; out is f32 or (for 16-bit operands) of their dtype. f32 runs as true f32 (no TF32), so that f32
// models give what the CPU gives. One plan (layouts + algorithm) is kept per shape; for the
// 16-bit products of up to kTunedTokens tokens (decode batches, which repeat every step) the
// algorithm is the fastest of cuBLASLt's candidates, timed once for each power-of-two bucket of
// token counts at its top count and used for all its counts (a server's batch size changes every
// few steps; timing each new one would stall it for milliseconds). The runner pads recorded
// decode steps to a power of two, so they run at the count their choice was timed for, whichever
// count of the bucket came first (timed at 48 instead, batch 64 ran 9% slower on the H200).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

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

  void run(const void* a, const void* w, DType dtype, void* out, DType out_dtype, int64_t T, int64_t N, int64_t K);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // dtype, out dtype, T, N, K, alignment of the three pointers (cuBLASLt picks kernels by alignment)
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int, int, int>;
  // w: the first call's weights, for timing the candidates.
  const Plan& plan(const Key& key, const void* w);
  void layouts(const Key& key, Plan& p) const;
  int candidates(const Key& key, const Plan& p, cublasLtMatmulHeuristicResult_t* out, int most) const;
  cublasLtMatmulAlgo_t timed_choice(const Key& bucket, cublasLtMatmulDesc_t desc, const void* w);
  static constexpr int64_t kTunedTokens = 512;
  static constexpr int kCandidates = 8;

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = size_t(32) << 20;
  std::map<Key, Plan> plans_;
  std::map<Key, cublasLtMatmulAlgo_t> tuned_;  // by the key with T rounded up to a power of two
};

}  // namespace tessera::cuda

#include "backend/cuda/gemm.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/check.h"

namespace tessera::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: throw Error("linear: unsupported weight dtype " + std::string(dtype_name(t)));
  }
}

int alignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && v % uintptr_t(a) != 0) a /= 2;
  return a;
}

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TESSERA_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

Gemm::Gemm(cudaStream_t stream) : stream_(stream) {
  TESSERA_CUDA_CHECK(cublasLtCreate(&handle_));
  TESSERA_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  if (const char* env = std::getenv("TESSERA_CUDA_SPLIT_K"); env && *env) forced_splits_ = std::max(1, std::atoi(env));
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Column-major view: out (N × T, ld N) = W (stored K × N, ld K)ᵀ · X (K × T, ld K).
const Gemm::Plan& Gemm::plan(const Key& key, const void* w) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const int dt = std::get<0>(key);
  const int64_t T = std::get<2>(key), N = std::get<3>(key), K = std::get<4>(key);
  Plan p;
  TESSERA_CUDA_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TESSERA_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TESSERA_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  layouts(key, p);
  const bool tune = DType(dt) != DType::F32 && T <= kTunedTokens;
  cublasLtMatmulHeuristicResult_t best{};
  if (candidates(key, p, &best, 1) == 0)
    throw Error("cuBLASLt: no algorithm for linear " + std::string(dtype_name(DType(dt))) + " T=" +
                std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
  p.algo = best.algo;
  if (tune) {
    // Decode batches: the choice timed for the bucket's top count (T rounded up to a power of
    // two), used by every count of the bucket where it applies. (Not while the stream is being
    // recorded: nothing runs then, and a bucket first met there keeps the heuristic's choice.)
    const Key bucket = bucket_of(key);
    auto known = tuned_.find(bucket);
    if (known == tuned_.end() && !capturing(stream_))
      known = tuned_.emplace(bucket, timed_choice(bucket, p.desc, w)).first;
    cublasLtMatmulHeuristicResult_t check{};
    if (known != tuned_.end() &&
        cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.c, p.c, &known->second.algo, &check) ==
            CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspace_bytes_)
      p.algo = known->second.algo;
  }
  return plans_.emplace(key, p).first->second;
}

Gemm::Key Gemm::bucket_of(Key key) {
  std::get<2>(key) = int64_t(1) << int(std::ceil(std::log2(double(std::get<2>(key)))));
  return key;
}

// A, B and C of key's shape (its T the token count). With k ranges, a strided batch: range s of
// W and X starts s·K/splits elements into their rows, its partial sum s·N·T elements into out.
void Gemm::layouts(const Key& key, Plan& p) const {
  const int64_t T = std::get<2>(key), N = std::get<3>(key), K = std::get<4>(key);
  const int splits = std::get<8>(key);
  const int64_t Ks = K / splits;
  cudaDataType_t in = cuda_type(DType(std::get<0>(key)));
  TESSERA_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.a, in, uint64_t(Ks), uint64_t(N), K));
  TESSERA_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.b, in, uint64_t(Ks), uint64_t(T), K));
  TESSERA_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.c, cuda_type(DType(std::get<1>(key))), uint64_t(N), uint64_t(T), N));
  if (splits == 1) return;
  const int32_t count = splits;
  for (auto [layout, stride] : {std::pair{p.a, Ks}, {p.b, Ks}, {p.c, N * T}}) {
    TESSERA_CUDA_CHECK(
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    TESSERA_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                        sizeof(stride)));
  }
}

// Up to `most` of cuBLASLt's candidates for p's layouts under key's alignments, best first.
int Gemm::candidates(const Key& key, const Plan& p, cublasLtMatmulHeuristicResult_t* out, int most) const {
  cublasLtMatmulPreference_t pref;
  TESSERA_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint32_t ax = uint32_t(std::get<5>(key)), aw = uint32_t(std::get<6>(key)), ao = uint32_t(std::get<7>(key));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                       sizeof(workspace_bytes_));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw, sizeof(aw));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ax, sizeof(ax));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ao, sizeof(ao));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ao, sizeof(ao));
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, most, out, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  return st == CUBLAS_STATUS_SUCCESS ? found : 0;
}

// The fastest of cuBLASLt's candidates for the bucket's shape (its T the top count), each run 3
// times after a warm-up on scratch activations and the real weights w. Each run starts from a
// cold L2 (a scratch buffer of twice its size written first): in a step every product's weights
// come from memory, and matrices that fit in L2 (an 8B's o, most of its q/k/v) would otherwise
// be timed from there, favouring kernels that only win there.
Gemm::Timed Gemm::timed_choice(const Key& bucket, cublasLtMatmulDesc_t desc, const void* w) {
  const int64_t T = std::get<2>(bucket), N = std::get<3>(bucket), K = std::get<4>(bucket);
  const DType dt = DType(std::get<0>(bucket)), out_dt = DType(std::get<1>(bucket));
  Plan p;
  p.desc = desc;
  layouts(bucket, p);
  cublasLtMatmulHeuristicResult_t results[kCandidates]{};
  const int found = candidates(bucket, p, results, kCandidates);
  Timed choice{results[0].algo, INFINITY};
  int device = 0, l2 = 0;
  if (found > 0) {
    TESSERA_CUDA_CHECK(cudaGetDevice(&device));
    TESSERA_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  }
  const size_t flush_bytes = size_t(2) * size_t(l2);
  const size_t x_bytes = size_t(T * K) * dtype_size(dt);
  const size_t out_bytes = size_t(std::get<8>(bucket)) * size_t(T * N) * dtype_size(out_dt);
  // The scratch is freed once timed; where memory is short (a KV cache sized to the last
  // gigabyte), the heuristic's first choice stands.
  void *flush = nullptr, *x = nullptr, *out = nullptr;
  bool scratch = false;
  if (found > 0) {
    scratch = cudaMalloc(&flush, flush_bytes) == cudaSuccess && cudaMalloc(&x, x_bytes) == cudaSuccess &&
              cudaMalloc(&out, out_bytes) == cudaSuccess;
    if (!scratch) cudaGetLastError();  // the failed allocation's error (not sticky)
  }
  if (scratch) {
    TESSERA_CUDA_CHECK(cudaMemsetAsync(x, 0x3c, x_bytes, stream_));  // 0.0115 in bf16, 1.06 in f16
    cudaEvent_t start, stop;
    TESSERA_CUDA_CHECK(cudaEventCreate(&start));
    TESSERA_CUDA_CHECK(cudaEventCreate(&stop));
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      auto matmul = [&] {
        return cublasLtMatmul(handle_, desc, &one, w, p.a, x, p.b, &zero, out, p.c, out, p.c, &results[i].algo,
                              workspace_, workspace_bytes_, stream_);
      };
      if (matmul() != CUBLAS_STATUS_SUCCESS) continue;
      float total = 0;
      for (int r = 0; r < 3; ++r) {
        TESSERA_CUDA_CHECK(cudaMemsetAsync(flush, r, flush_bytes, stream_));
        TESSERA_CUDA_CHECK(cudaEventRecord(start, stream_));
        matmul();
        TESSERA_CUDA_CHECK(cudaEventRecord(stop, stream_));
        TESSERA_CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        TESSERA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        total += ms;
      }
      if (total / 3 < choice.ms) choice = {results[i].algo, total / 3};
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  for (void* b : {flush, x, out}) cudaFree(b);  // cudaFree(nullptr) does nothing
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.c);
  return choice;
}

int Gemm::splits(const void* a, const void* w, DType dtype, int64_t T, int64_t N, int64_t K) {
  // Each range starts on a 16-byte boundary of the rows, and is long enough to stream.
  auto divides = [&](int s) { return K % (int64_t(8) * s) == 0 && K / s >= kMinSplitK; };
  if (forced_splits_) return divides(forced_splits_) ? forced_splits_ : 1;
  if (dtype == DType::F32 || T > kTunedTokens) return 1;
  // The partial sums come from the caching allocator, whose blocks are 256-byte aligned.
  const Key bucket = bucket_of({int(dtype), int(DType::F32), T, N, K, alignment(a), alignment(w), 256, 0});
  if (auto known = splits_.find(bucket); known != splits_.end()) return known->second;
  if (capturing(stream_)) return 1;
  int best = 1;
  float best_ms = INFINITY;
  for (int s : {1, 2, 4, 8}) {
    if (!divides(s)) continue;
    Key key = bucket;
    std::get<8>(key) = s;
    plan(key, w);  // times the bucket's choice (key's T is the bucket's top count)
    auto timed = tuned_.find(key);
    if (timed != tuned_.end() && timed->second.ms < best_ms) best = s, best_ms = timed->second.ms;
  }
  splits_.emplace(bucket, best);
  return best;
}

void Gemm::run(const void* a, const void* w, DType dtype, void* out, DType out_dtype, int64_t T, int64_t N,
               int64_t K, int splits) {
  if (T == 0 || N == 0) return;
  TESSERA_CHECK(out_dtype == DType::F32 || out_dtype == dtype,
                "linear: output of " + std::string(dtype_name(out_dtype)) + " for " + std::string(dtype_name(dtype)) +
                    " operands");
  TESSERA_CHECK(splits >= 1 && K % splits == 0, "linear: " + std::to_string(K) + " columns in " +
                                                     std::to_string(splits) + " k ranges");
  const Plan& p =
      plan({int(dtype), int(out_dtype), T, N, K, alignment(a), alignment(w), alignment(out), splits}, w);
  const float one = 1.0f, zero = 0.0f;
  TESSERA_CUDA_CHECK(cublasLtMatmul(handle_, p.desc, &one, w, p.a, a, p.b, &zero, out, p.c, out, p.c, &p.algo,
                                    workspace_, workspace_bytes_, stream_));
}

}  // namespace tessera::cuda

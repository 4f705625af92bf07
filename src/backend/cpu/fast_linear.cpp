#include <vector>

#include "backend/cpu/fast_ops.h"
#include "backend/cpu/reference_ops.h"
#include "core/error.h"

namespace tessera::cpu::fast {

// Output features are split across threads; each weight row is converted once and reused
// for every token of the batch.
void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  int64_t K = x.dim(-1), T = x.numel() / K, N = w.dim(0);
  TESSERA_CHECK(w.dim(1) == K, "linear: weight " + shape_str(w.shape()) + " vs input " + shape_str(x.shape()));
  std::vector<float> b(N, 0.0f);
  if (bias.defined()) ref::to_f32(bias, 0, N, b.data());
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  pool.parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(K);
    for (int64_t n = n0; n < n1; ++n) {
      const float* r = row.data();
      if (w.dtype() == DType::F32) r = w.data<float>() + n * K;
      else ref::to_f32(w, n * K, K, row.data());
      for (int64_t t = 0; t < T; ++t) {
        const float* xr = xp + t * K;
        float acc[8] = {};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
          for (int j = 0; j < 8; ++j) acc[j] += xr[k + j] * r[k + j];
        float sum = 0;
        for (; k < K; ++k) sum += xr[k] * r[k];
        for (int j = 0; j < 8; ++j) sum += acc[j];
        op[t * N + n] = sum + b[n];
      }
    }
  });
}

}  // namespace tessera::cpu::fast

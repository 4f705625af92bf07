#include <cmath>
#include <vector>

#include "backend/cpu/fast_ops.h"
#include "backend/cpu/reference_ops.h"

namespace tessera::cpu::fast {

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, float offset, Tensor& out) {
  int64_t D = x.dim(-1), T = x.numel() / D;
  std::vector<float> wf(D);
  ref::to_f32(w, 0, D, wf.data());
  pool.parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x.data<float>() + t * D;
      float* o = out.data<float>() + t * D;
      float ss = 0;
      for (int64_t i = 0; i < D; ++i) ss += xr[i] * xr[i];
      float inv = 1.0f / std::sqrt(ss / float(D) + eps);
      for (int64_t i = 0; i < D; ++i) o[i] = xr[i] * inv * (wf[i] + offset);
    }
  });
}

void silu_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, Tensor& out) {
  pool.parallel_for(gate.numel(), 4096, [&](int64_t i0, int64_t i1) {
    const float* g = gate.data<float>();
    const float* u = up.data<float>();
    float* o = out.data<float>();
    for (int64_t i = i0; i < i1; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

}  // namespace tessera::cpu::fast

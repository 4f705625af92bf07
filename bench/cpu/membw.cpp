#include "membw.h"

#include <immintrin.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace tessera::bench {

double read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int reps) {
  size_t n = bytes / sizeof(float) / 64 * 64;
  std::unique_ptr<float, decltype(&std::free)> buf(static_cast<float*>(std::aligned_alloc(64, n * 4)), std::free);
  float* p = buf.get();
  // Written by the threads that read it, so pages are faulted in before timing.
  pool.parallel_for(int64_t(n), 64, [&](int64_t b, int64_t e) { std::memset(p + b, 1, size_t(e - b) * 4); });
  std::vector<float> sink(pool.size());
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(int64_t(n), 64, [&](int64_t b, int64_t e) {
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t i = b; i < e; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
      }
      __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
      float out[8];
      _mm256_storeu_ps(out, s);
      sink[size_t(b * pool.size() / int64_t(n))] = out[0];
    });
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(n) * 4 / sec / 1e9);
  }
  volatile float keep = sink[0];
  (void)keep;
  return best;
}

}  // namespace tessera::bench

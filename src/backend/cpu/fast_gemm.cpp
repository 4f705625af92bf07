// Packed GEMM: blocks of 16 output features × KC inputs are widened to f32 and transposed into a
// small per-thread scratch (never a second copy of the weight), then a 6×16 AVX2 microkernel
// (12 accumulators) multiplies them with 6 tokens at a time. Threads split the output features.
#include "backend/cpu/fast_gemm.h"

#include <algorithm>
#include <memory>

#include "backend/cpu/fast_simd.h"

namespace tessera::cpu::fast {
namespace {

constexpr int MR = 6, NR = 16;
constexpr int64_t KC = 256;  // one 16-feature panel: KC * 16 * 4 = 16 KiB, stays in L1
constexpr int64_t NC = 128;  // features packed at a time: NC * KC * 4 = 128 KiB of scratch, in L2

// In-register transpose: afterwards r[j][i] is the old r[i][j].
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Packs rows [0, nb) × columns [0, kc) of w (row stride K) as panels dst[p][k][16], zero past nb.
template <class W>
void pack(const typename W::T* w, int64_t K, int64_t nb, int64_t kc, float* dst) {
  for (int64_t p = 0; p * NR < nb; ++p) {
    float* d = dst + p * kc * NR;
    const typename W::T* wp = w + p * NR * K;
    int64_t rows = std::min<int64_t>(NR, nb - p * NR);
    if (rows < NR) {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < NR; ++j) d[k * NR + j] = j < rows ? W::load1(wp + j * K + k) : 0.0f;
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      const typename W::T* wh = wp + h * 8 * K;
      int64_t k = 0;
      for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = W::load8(wh + i * K + k);
        transpose8(r);
        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(d + (k + j) * NR + h * 8, r[j]);
      }
      for (; k < kc; ++k)
        for (int i = 0; i < 8; ++i) d[k * NR + h * 8 + i] = W::load1(wh + i * K + k);
    }
  }
}

// c[M, ncols] (+)= x[M, kc] · panel, where panel is [kc][16] and x has row stride ldx.
template <int M>
void kernel(const float* x, int64_t ldx, const float* b, int64_t kc, float* c, int64_t ldc, int64_t ncols,
            bool accumulate) {
  __m256 acc[M][2];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b0 = _mm256_loadu_ps(b + k * NR), b1 = _mm256_loadu_ps(b + k * NR + 8);
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      __m256 a = _mm256_broadcast_ss(x + m * ldx + k);
      acc[m][0] = _mm256_fmadd_ps(a, b0, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(a, b1, acc[m][1]);
    }
  }
  // Fully unrolled so the accumulators stay in registers (a runtime index would spill them).
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) {
    float* cm = c + m * ldc;
    if (ncols == NR) {
      if (accumulate) {
        acc[m][0] = _mm256_add_ps(acc[m][0], _mm256_loadu_ps(cm));
        acc[m][1] = _mm256_add_ps(acc[m][1], _mm256_loadu_ps(cm + 8));
      }
      _mm256_storeu_ps(cm, acc[m][0]);
      _mm256_storeu_ps(cm + 8, acc[m][1]);
    } else {
      alignas(32) float tmp[NR];
      _mm256_store_ps(tmp, acc[m][0]);
      _mm256_store_ps(tmp + 8, acc[m][1]);
      for (int64_t j = 0; j < ncols; ++j) cm[j] = accumulate ? cm[j] + tmp[j] : tmp[j];
    }
  }
}

using Kernel = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);
constexpr Kernel kKernels[MR + 1] = {nullptr, kernel<1>, kernel<2>, kernel<3>, kernel<4>, kernel<5>, kernel<6>};

}  // namespace

template <class W>
void gemm(ThreadPool& pool, const float* x, const typename W::T* w, int64_t T, int64_t K, int64_t N, float* out) {
  pool.parallel_for(N, NR, [&](int64_t n0, int64_t n1) {
    auto scratch = std::unique_ptr<float[]>(new float[NC * KC]);
    for (int64_t nc0 = n0; nc0 < n1; nc0 += NC) {
      int64_t nb = std::min(NC, n1 - nc0);
      for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = std::min(KC, K - k0);
        pack<W>(w + nc0 * K + k0, K, nb, kc, scratch.get());
        for (int64_t p = 0; p * NR < nb; ++p) {
          const float* b = scratch.get() + p * kc * NR;
          int64_t ncols = std::min<int64_t>(NR, nb - p * NR);
          for (int64_t t0 = 0; t0 < T; t0 += MR) {
            int64_t m = std::min<int64_t>(MR, T - t0);
            kKernels[m](x + t0 * K + k0, K, b, kc, out + t0 * N + nc0 + p * NR, N, ncols, k0 > 0);
          }
        }
      }
    }
  });
}

template void gemm<F32W>(ThreadPool&, const float*, const float*, int64_t, int64_t, int64_t, float*);
template void gemm<F16W>(ThreadPool&, const float*, const uint16_t*, int64_t, int64_t, int64_t, float*);
template void gemm<BF16W>(ThreadPool&, const float*, const uint16_t*, int64_t, int64_t, int64_t, float*);

}  // namespace tessera::cpu::fast

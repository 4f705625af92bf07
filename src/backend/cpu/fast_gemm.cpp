// Packed GEMM: blocks of NR output features × KC inputs are widened to f32 and transposed into a
// small per-thread scratch (never a second copy of the weight), then a microkernel multiplies
// them with MR tokens at a time: 6×16 on AVX2 (12 of 16 registers accumulate), 12×32 on
// AVX-512 (24 of 32). Threads split the output features.
#include "backend/cpu/fast_gemm.h"

#include <algorithm>
#include <memory>

#include "backend/cpu/fast_ops.h"
#include "backend/cpu/fast_simd.h"

namespace tessera::cpu::fast {
namespace {

constexpr int64_t KC = 256;  // one panel: KC * NR * 4 = 16 (AVX2) or 32 KiB (AVX-512), stays in L1
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

// The same for 16 × 16 in 512-bit registers: 64 shuffles for 256 elements, against 96 with 8 × 8
// (maskz unpacks with a full mask: see load16 in fast_simd.h).
TESSERA_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_ps(0xffff, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(0xffff, r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  // u[4a + b] holds rows 4a..4a+3, column b + 4c in 128-bit lane c.
  for (int i = 0; i < 2; ++i)
    for (int b = 0; b < 4; ++b) {
      t[8 * i + b] = _mm512_maskz_shuffle_f32x4(0xffff, u[8 * i + b], u[8 * i + 4 + b], 0x88);
      t[8 * i + 4 + b] = _mm512_maskz_shuffle_f32x4(0xffff, u[8 * i + b], u[8 * i + 4 + b], 0xDD);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_maskz_shuffle_f32x4(0xffff, t[j], t[8 + j], 0x88);
    r[j + 8] = _mm512_maskz_shuffle_f32x4(0xffff, t[j], t[8 + j], 0xDD);
  }
}

// Packs rows [0, nb) × columns [0, kc) of w (row stride K) as panels dst[p][k][NR], zero past nb.
template <class W, int NR>
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
    for (int h = 0; h < NR / 8; ++h) {
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

// pack<W, 32> with 16 × 16 transposes.
template <class W>
TESSERA_AVX512 void pack_avx512(const typename W::T* w, int64_t K, int64_t nb, int64_t kc, float* dst) {
  constexpr int NR = 32;
  for (int64_t p = 0; p * NR < nb; ++p) {
    if (nb - p * NR < NR) {
      pack<W, NR>(w + p * NR * K, K, nb - p * NR, kc, dst + p * kc * NR);
      continue;
    }
    float* d = dst + p * kc * NR;
    for (int h = 0; h < 2; ++h) {
      const typename W::T* wh = w + (p * NR + h * 16) * K;
      int64_t k = 0;
      for (; k + 16 <= kc; k += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; ++i) r[i] = W::load16(wh + i * K + k);
        transpose16(r);
        for (int j = 0; j < 16; ++j) _mm512_storeu_ps(d + (k + j) * NR + h * 16, r[j]);
      }
      for (; k < kc; ++k)
        for (int i = 0; i < 16; ++i) d[k * NR + h * 16 + i] = W::load1(wh + i * K + k);
    }
  }
}

using Kernel = void (*)(const float* x, int64_t ldx, const float* panel, int64_t kc, float* c, int64_t ldc,
                        int64_t ncols, bool accumulate);

// c[M, ncols] (+)= x[M, kc] · panel, where panel is [kc][16] and x has row stride ldx.
template <int M>
void kernel_avx2(const float* x, int64_t ldx, const float* b, int64_t kc, float* c, int64_t ldc, int64_t ncols,
                 bool accumulate) {
  constexpr int NR = 16;
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

// The same with 512-bit vectors: panel is [kc][32].
template <int M>
TESSERA_AVX512 void kernel_avx512(const float* x, int64_t ldx, const float* b, int64_t kc, float* c, int64_t ldc,
                                  int64_t ncols, bool accumulate) {
  constexpr int NR = 32;
  __m512 acc[M][2];
#pragma GCC unroll 16
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m512 b0 = _mm512_loadu_ps(b + k * NR), b1 = _mm512_loadu_ps(b + k * NR + 16);
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      __m512 a = _mm512_set1_ps(x[m * ldx + k]);
      acc[m][0] = _mm512_fmadd_ps(a, b0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(a, b1, acc[m][1]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < M; ++m) {
    float* cm = c + m * ldc;
    if (ncols == NR) {
      if (accumulate) {
        acc[m][0] = _mm512_add_ps(acc[m][0], _mm512_loadu_ps(cm));
        acc[m][1] = _mm512_add_ps(acc[m][1], _mm512_loadu_ps(cm + 16));
      }
      _mm512_storeu_ps(cm, acc[m][0]);
      _mm512_storeu_ps(cm + 16, acc[m][1]);
    } else {
      alignas(64) float tmp[NR];
      _mm512_store_ps(tmp, acc[m][0]);
      _mm512_store_ps(tmp + 16, acc[m][1]);
      for (int64_t j = 0; j < ncols; ++j) cm[j] = accumulate ? cm[j] + tmp[j] : tmp[j];
    }
  }
}

constexpr Kernel kAvx2[] = {nullptr, kernel_avx2<1>, kernel_avx2<2>, kernel_avx2<3>, kernel_avx2<4>, kernel_avx2<5>,
                            kernel_avx2<6>};
constexpr Kernel kAvx512[] = {nullptr,           kernel_avx512<1>,  kernel_avx512<2>, kernel_avx512<3>,
                              kernel_avx512<4>,  kernel_avx512<5>,  kernel_avx512<6>, kernel_avx512<7>,
                              kernel_avx512<8>,  kernel_avx512<9>,  kernel_avx512<10>, kernel_avx512<11>,
                              kernel_avx512<12>};

// Prefetches, into L2, the weight block [rows, cols) of row stride `ld` bytes in `calls` installments:
// its rows are pages apart, which hardware prefetchers do not follow, so without this the pack
// of each block waits on memory.
class BlockPrefetcher {
 public:
  BlockPrefetcher(const char* base, int64_t rows, int64_t row_bytes, int64_t ld, int64_t calls)
      : row_(base), end_(base + rows * ld), ld_(ld), row_bytes_(row_bytes),
        per_call_((rows * ((row_bytes + 63) / 64) + calls - 1) / std::max<int64_t>(1, calls)) {}
  void step() {
    for (int64_t i = 0; i < per_call_ && row_ < end_; ++i) {
      _mm_prefetch(row_ + offset_, _MM_HINT_T1);
      if ((offset_ += 64) >= row_bytes_) offset_ = 0, row_ += ld_;
    }
  }

 private:
  const char* row_;
  const char* end_;
  int64_t ld_, row_bytes_, per_call_, offset_ = 0;
};

// kernels[m] computes m tokens (1 <= m <= MR) against one NR-feature panel.
template <class W, int NR, bool Wide>
void gemm_with(ThreadPool& pool, const float* x, const typename W::T* w, int64_t T, int64_t K, int64_t N, float* out,
               int64_t MR, const Kernel* kernels) {
  using WT = typename W::T;
  pool.parallel_for(N, NR, [&](int64_t n0, int64_t n1) {
    auto scratch = std::unique_ptr<float[]>(new float[NC * KC]);
    for (int64_t nc0 = n0; nc0 < n1; nc0 += NC) {
      int64_t nb = std::min(NC, n1 - nc0);
      for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = std::min(KC, K - k0);
        if constexpr (Wide) pack_avx512<W>(w + nc0 * K + k0, K, nb, kc, scratch.get());
        else pack<W, NR>(w + nc0 * K + k0, K, nb, kc, scratch.get());
        // The block packed next: the following columns, or the first ones of the next rows.
        int64_t next_n = k0 + KC < K ? nc0 : nc0 + NC, next_k = k0 + KC < K ? k0 + KC : 0;
        int64_t panels = (nb + NR - 1) / NR, tblocks = (T + MR - 1) / MR;
        BlockPrefetcher next(reinterpret_cast<const char*>(w + next_n * K + next_k),
                             next_n < n1 ? std::min(NC, n1 - next_n) : 0,
                             std::min(KC, K - next_k) * int64_t(sizeof(WT)), K * int64_t(sizeof(WT)), panels * tblocks);
        for (int64_t p = 0; p < panels; ++p) {
          const float* b = scratch.get() + p * kc * NR;
          int64_t ncols = std::min<int64_t>(NR, nb - p * NR);
          for (int64_t t0 = 0; t0 < T; t0 += MR) {
            int64_t m = std::min<int64_t>(MR, T - t0);
            kernels[m](x + t0 * K + k0, K, b, kc, out + t0 * N + nc0 + p * NR, N, ncols, k0 > 0);
            next.step();
          }
        }
      }
    }
  });
}

}  // namespace

template <class W>
void gemm(ThreadPool& pool, const float* x, const typename W::T* w, int64_t T, int64_t K, int64_t N, float* out) {
  if (isa() == Isa::Avx512) gemm_with<W, 32, true>(pool, x, w, T, K, N, out, 12, kAvx512);
  else gemm_with<W, 16, false>(pool, x, w, T, K, N, out, 6, kAvx2);
}

template void gemm<F32W>(ThreadPool&, const float*, const float*, int64_t, int64_t, int64_t, float*);
template void gemm<F16W>(ThreadPool&, const float*, const uint16_t*, int64_t, int64_t, int64_t, float*);
template void gemm<BF16W>(ThreadPool&, const float*, const uint16_t*, int64_t, int64_t, int64_t, float*);

}  // namespace tessera::cpu::fast

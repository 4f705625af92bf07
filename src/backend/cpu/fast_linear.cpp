// linear: out[T, N] = x[T, K] · w[N, K]ᵀ (+ bias). Few tokens (decode): stream each weight row once
// from memory straight into FMAs (gemv below). Many tokens (prefill): the packed GEMM of fast_gemm.cpp.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backend/cpu/fast_gemm.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/fast_simd.h"
#include "backend/cpu/reference_ops.h"
#include "core/error.h"

namespace tessera::cpu::fast {
namespace {

// Up to this many tokens the weight-streaming kernel wins (measured with bench_cpu_ops).
constexpr int64_t kGemvMaxTokens = 8;

// R weight rows × TT tokens: acc[r][t] += w[r, k:k+8] * x[t, k:k+8]. Each weight vector is
// loaded and widened once and feeds TT FMAs; R independent rows keep enough loads in flight.
template <class W, int R, int TT>
void gemv_tile(const typename W::T* w, int64_t K, const float* x, float* out, int64_t ldo) {
  __m256 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  // Hardware prefetchers stop at page boundaries, and R rows in flight are R separate streams:
  // fetch the next R rows (the next call's) at the pace this block is read.
  const char* next = reinterpret_cast<const char*>(w + R * K);
  constexpr int64_t kStep = R * 8 * int64_t(sizeof(typename W::T));  // bytes of the next block per k step
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
#pragma GCC unroll 4
    for (int64_t b = 0; b < kStep; b += 64) _mm_prefetch(next + k * kStep / 8 + b, _MM_HINT_T0);
    __m256 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = W::load8(w + r * K + k);
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      __m256 xv = _mm256_loadu_ps(x + t * K + k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  // Fully unrolled so the accumulators stay in registers (a runtime index would spill them).
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      float s = hsum(acc[r][t]);
      for (int64_t j = k; j < K; ++j) s += W::load1(w + r * K + j) * x[t * K + j];
      out[t * ldo + r] = s;
    }
}

// The same with 512-bit vectors, for several tokens, where the FMAs rather than memory limit.
template <class W, int R, int TT>
TESSERA_AVX512 void gemv_tile_avx512(const typename W::T* w, int64_t K, const float* x, float* out, int64_t ldo) {
  __m512 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = W::load16(w + r * K + k);
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      __m512 xv = _mm512_loadu_ps(x + t * K + k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][t]);
      float s = hsum(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
      for (int64_t j = k; j < K; ++j) s += W::load1(w + r * K + j) * x[t * K + j];
      out[t * ldo + r] = s;
    }
}

template <class W>
using TileFn = void (*)(const typename W::T* w, int64_t K, const float* x, float* out, int64_t ldo);

// tiles[tt - 1] handles tt tokens.
template <class W, int R, bool Wide, size_t... I>
constexpr std::array<TileFn<W>, sizeof...(I)> make_tiles(std::index_sequence<I...>) {
  if constexpr (Wide) return {gemv_tile_avx512<W, R, int(I) + 1>...};
  else return {gemv_tile<W, R, int(I) + 1>...};
}

// Tokens in groups of up to G, as even as possible (T = 5 -> 3 + 2, not 4 + 1).
template <class W, int R, bool Wide>
void gemv_rows(const typename W::T* w, int64_t K, const float* x, int64_t T, float* out, int64_t N) {
  constexpr int64_t G = Wide ? 8 : 4;
  static constexpr auto tiles = make_tiles<W, R, Wide>(std::make_index_sequence<G>{});
  for (int64_t t0 = 0; t0 < T;) {
    int64_t groups = (T - t0 + G - 1) / G, tt = (T - t0 + groups - 1) / groups;
    tiles[size_t(tt - 1)](w, K, x + t0 * K, out + t0 * N, N);
    t0 += tt;
  }
}

// Rows in blocks of R. One token: 4 rows (enough independent streams to keep memory busy). More
// tokens: 2 rows x up to 4 tokens of accumulators on AVX2 (16 registers), 2 rows x up to 8 tokens
// on AVX-512 (32 registers), so each weight vector is widened once for as many tokens as fit.
template <class W, int R, bool Wide>
void gemv_range(const typename W::T* w, int64_t K, const float* x, int64_t T, float* out, int64_t N, int64_t n0,
                int64_t n1) {
  int64_t n = n0;
  for (; n + R <= n1; n += R) gemv_rows<W, R, Wide>(w + n * K, K, x, T, out + n, N);
  for (; n < n1; ++n) gemv_rows<W, 1, Wide>(w + n * K, K, x, T, out + n, N);
}

template <class W>
void gemv(ThreadPool& pool, const float* x, const typename W::T* w, int64_t T, int64_t K, int64_t N, float* out) {
  // Each thread takes one contiguous range of rows, at least ~64 KiB of weights.
  int64_t grain = std::max<int64_t>(4, (65536 / (K * int64_t(sizeof(typename W::T))) + 3) / 4 * 4);
  pool.parallel_for(N, grain, [&](int64_t n0, int64_t n1) {
    if (T == 1) gemv_range<W, 4, false>(w, K, x, T, out, N, n0, n1);
    else if (isa() == Isa::Avx512) gemv_range<W, 2, true>(w, K, x, T, out, N, n0, n1);
    else gemv_range<W, 2, false>(w, K, x, T, out, N, n0, n1);
  });
}

}  // namespace

void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  int64_t K = x.dim(-1), T = x.numel() / K, N = w.dim(0);
  TESSERA_CHECK(w.dim(1) == K, "linear: weight " + shape_str(w.shape()) + " vs input " + shape_str(x.shape()));
  TESSERA_CHECK(out.numel() == T * N, "linear: output " + shape_str(out.shape()) + " for " +
                                          std::to_string(T) + " x " + std::to_string(N));
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  with_weight_type(w.dtype(), [&]<class W>() {
    const auto* wp = static_cast<const typename W::T*>(w.raw());
    if (T <= kGemvMaxTokens) gemv<W>(pool, xp, wp, T, K, N, op);
    else gemm<W>(pool, xp, wp, T, K, N, op);
  });
  if (bias.defined()) {
    std::vector<float> b(N);
    ref::to_f32(bias, 0, N, b.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) op[t * N + n] += b[n];
  }
}

}  // namespace tessera::cpu::fast

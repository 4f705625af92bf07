// linear: out[T, N] = x[T, K] · w[N, K]ᵀ (+ bias). Few tokens (decode): stream each weight row once
// from memory straight into FMAs (gemv below). Many tokens (prefill): the packed GEMM of fast_gemm.cpp.
// Quantized weights: fast_quantized.cpp.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backend/cpu/fast_gemm.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/fast_quantized.h"
#include "backend/cpu/fast_simd.h"
#include "backend/cpu/reference_ops.h"
#include "core/error.h"

namespace tessera::cpu::fast {
namespace {

// Up to this many tokens (batched decode) the weights stream straight into FMAs; more go to the
// packed GEMM. Chosen, not tuned: the crossover has not been measured on a quiet machine.
constexpr int64_t kGemvMaxTokens = 8;

// Where a tile's rows and tokens are: rows of w (stride ldw) and of x (stride ldx) over the same
// n columns; results go to out (row stride ldo), added to what is there when accumulate is set.
template <class WT>
struct Span {
  const WT* w;
  int64_t ldw;
  const float* x;
  int64_t ldx, n;
  float* out;
  int64_t ldo;
  bool accumulate;
};

template <class WT, int R>
inline void prefetch_next_rows(const Span<WT>& s, int64_t k) {
  // Hardware prefetchers stop at page boundaries, and R rows in flight are R separate streams:
  // fetch the next R rows (the next tile's) at the pace this tile reads its own, a line at a time.
  if ((uint64_t(k) & (64 / sizeof(WT) - 1)) != 0) return;
  for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(s.w + (R + r) * s.ldw + k), _MM_HINT_T0);
}

template <class W, int R, int TT>
inline void finish_tile(const Span<typename W::T>& s, int64_t k, const float (&sums)[R][TT]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      float v = sums[r][t];
      for (int64_t j = k; j < s.n; ++j) v += W::load1(s.w + r * s.ldw + j) * s.x[t * s.ldx + j];
      float* o = s.out + t * s.ldo + r;
      *o = s.accumulate ? *o + v : v;
    }
}

// R weight rows × TT tokens: acc[r][t] += w[r, k:k+8] * x[t, k:k+8]. Each weight vector is
// loaded and widened once and feeds TT FMAs; R independent rows keep enough loads in flight.
template <class W, int R, int TT>
void gemv_tile(const Span<typename W::T>& s) {
  __m256 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= s.n; k += 8) {
    prefetch_next_rows<typename W::T, R>(s, k);
    __m256 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = W::load8(s.w + r * s.ldw + k);
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      __m256 xv = _mm256_loadu_ps(s.x + t * s.ldx + k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  // Fully unrolled so the accumulators stay in registers (a runtime index would spill them).
  float sums[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) sums[r][t] = hsum(acc[r][t]);
  finish_tile<W, R, TT>(s, k, sums);
}

// The same with 512-bit vectors, for several tokens, where the FMAs rather than memory limit.
template <class W, int R, int TT>
TESSERA_AVX512 void gemv_tile_avx512(const Span<typename W::T>& s) {
  __m512 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= s.n; k += 16) {
    prefetch_next_rows<typename W::T, R>(s, k);
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = W::load16(s.w + r * s.ldw + k);
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      __m512 xv = _mm512_loadu_ps(s.x + t * s.ldx + k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  float sums[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][t]);
      sums[r][t] = hsum(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
    }
  finish_tile<W, R, TT>(s, k, sums);
}

template <class W>
using TileFn = void (*)(const Span<typename W::T>& s);

// tiles[tt - 1] handles tt tokens.
template <class W, int R, bool Wide, size_t... I>
constexpr std::array<TileFn<W>, sizeof...(I)> make_tiles(std::index_sequence<I...>) {
  if constexpr (Wide) return {gemv_tile_avx512<W, R, int(I) + 1>...};
  else return {gemv_tile<W, R, int(I) + 1>...};
}

// Rows in blocks of R, tokens in groups of up to G, as even as possible (T = 5 -> 3 + 2, not
// 4 + 1). One token: 4 rows (enough independent streams to keep memory busy). More tokens:
// 2 rows x up to 4 tokens of accumulators on AVX2 (16 registers), 2 rows x up to 8 tokens on
// AVX-512 (32 registers), so each weight vector is widened once for as many tokens as fit.
template <class W, int R, bool Wide>
void gemv_range(Span<typename W::T> s, int64_t T, int64_t n0, int64_t n1) {
  constexpr int64_t G = Wide ? 8 : 4;
  static constexpr auto tiles = make_tiles<W, R, Wide>(std::make_index_sequence<G>{});
  static constexpr auto single = make_tiles<W, 1, Wide>(std::make_index_sequence<G>{});
  for (int64_t n = n0; n < n1;) {
    bool full = n + R <= n1;
    for (int64_t t0 = 0; t0 < T;) {
      int64_t groups = (T - t0 + G - 1) / G, tt = (T - t0 + groups - 1) / groups;
      Span<typename W::T> tile = s;
      tile.w = s.w + n * s.ldw;
      tile.x = s.x + t0 * s.ldx;
      tile.out = s.out + t0 * s.ldo + n;
      (full ? tiles : single)[size_t(tt - 1)](tile);
      t0 += tt;
    }
    n += full ? R : 1;
  }
}

template <class W>
void gemv(ThreadPool& pool, const float* x, const typename W::T* w, int64_t T, int64_t K, int64_t N, float* out) {
  // Each thread takes one contiguous range of rows, at least ~64 KiB of weights.
  int64_t grain = std::max<int64_t>(4, (65536 / (K * int64_t(sizeof(typename W::T))) + 3) / 4 * 4);
  // Several tokens of x outgrow L1 (8 tokens of K = 2048 are 64 KiB) and every row block would
  // re-read them from L2: go over K in chunks whose slice of x stays in L1, adding up each
  // chunk's partial dot products in out.
  int64_t chunk = T == 1 ? K : std::max<int64_t>(256, (32768 / (4 * T)) / 16 * 16);
  pool.parallel_for(N, grain, [&](int64_t n0, int64_t n1) {
    for (int64_t k0 = 0; k0 < K; k0 += chunk) {
      Span<typename W::T> s{w + k0, K, x + k0, K, std::min(chunk, K - k0), out, N, k0 > 0};
      if (T == 1) gemv_range<W, 4, false>(s, T, n0, n1);
      else if (isa() == Isa::Avx512) gemv_range<W, 2, true>(s, T, n0, n1);
      else gemv_range<W, 2, false>(s, T, n0, n1);
    }
  });
}

}  // namespace

void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  int64_t K = x.dim(-1), T = x.numel() / K, N = w.dim(0);
  TESSERA_CHECK(w.dim(1) == K, "linear: weight " + shape_str(w.shape()) + " vs input " + shape_str(x.shape()));
  TESSERA_CHECK(out.numel() == T * N, "linear: output " + shape_str(out.shape()) + " for " +
                                          std::to_string(T) + " x " + std::to_string(N));
  if (T == 0 || N == 0) return;  // e.g. a step where no sequence needs logits
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  if (w.quantization()) {
    quantized_linear(pool, xp, w, T, op);
  } else {
    with_weight_type(w.dtype(), [&]<class W>() {
      const auto* wp = static_cast<const typename W::T*>(w.raw());
      if (T <= kGemvMaxTokens)
        gemv<W>(pool, xp, wp, T, K, N, op);
      else
        gemm<W>(pool, xp, wp, T, K, N, op);
    });
  }
  if (bias.defined()) {
    std::vector<float> b(N);
    ref::to_f32(bias, 0, N, b.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) op[t * N + n] += b[n];
  }
}

}  // namespace tessera::cpu::fast

// linear with a quantized weight (core/quantization.h): out[T, N] = x[T, K] · w[N, K]ᵀ, w held as
// codes with a scale and a bias per group. Few tokens (decode): each row's codes are read once
// from memory and widened in registers, 8 (AVX-512: 16) at a time, to s * q + b, which feeds every
// token's FMAs, so a 4-bit weight streams a quarter of a bf16 one's bytes. Widening costs about as
// many instructions as the FMAs (4-bit codes on AVX-512 look their values up instead, in half as
// many), so on a machine with fast memory the 1-token product is bound by them, not by the bytes.
// Many tokens (prefill): blocks of rows are dequantized to f32 into a scratch and multiplied by
// the packed GEMM (fast_gemm.cpp).
#include "backend/cpu/fast_quantized.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/fast_gemm.h"
#include "backend/cpu/fast_ops.h"
#include "backend/cpu/fast_simd.h"
#include "backend/cpu/reference_ops.h"
#include "core/quantization.h"

namespace tessera::cpu::fast {
namespace {

// As fast_linear.cpp's: up to this many tokens the codes stream straight into FMAs.
constexpr int64_t kGemvMaxTokens = 8;

// The 8 codes of Bits bits that start at byte p (8 codes fill Bits bytes), as f32 lanes.
template <int Bits>
inline __m256 codes8(const uint8_t* p) {
  if constexpr (Bits == 8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  } else if constexpr (32 % Bits == 0) {  // 2 and 4 bits: one broadcast word, shifted per lane
    uint32_t v = 0;
    std::memcpy(&v, p, Bits);
    const __m256i shifts =
        _mm256_setr_epi32(0, Bits, 2 * Bits, 3 * Bits, 4 * Bits, 5 * Bits, 6 * Bits, 7 * Bits);
    const __m256i codes = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(v)), shifts),
                                           _mm256_set1_epi32((1 << Bits) - 1));
    return _mm256_cvtepi32_ps(codes);
  } else {  // 3, 5 and 6 bits: lanes 0-3 take the first 4 * Bits bits, lanes 4-7 the next ones
    uint64_t v = 0;
    std::memcpy(&v, p, Bits);
    const uint32_t lo = uint32_t(v & ((uint64_t(1) << (4 * Bits)) - 1)), hi = uint32_t(v >> (4 * Bits));
    const __m256i words =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi32(int(lo))), _mm_set1_epi32(int(hi)), 1);
    const __m256i shifts = _mm256_setr_epi32(0, Bits, 2 * Bits, 3 * Bits, 0, Bits, 2 * Bits, 3 * Bits);
    const __m256i codes =
        _mm256_and_si256(_mm256_srlv_epi32(words, shifts), _mm256_set1_epi32((1 << Bits) - 1));
    return _mm256_cvtepi32_ps(codes);
  }
}

// The same for 16 codes (2 * Bits bytes) in 512-bit lanes, for the widths other than 4 (those
// qgemv_tile_avx512 looks up). Maskz forms with a full mask: see load16 in fast_simd.h.
template <int Bits>
TESSERA_AVX512 inline __m512 codes16(const uint8_t* p) {
  if constexpr (Bits == 8) {
    return _mm512_maskz_cvtepi32_ps(
        0xffff, _mm512_maskz_cvtepu8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  } else if constexpr (Bits == 2) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    const __m512i shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_maskz_cvtepi32_ps(
        0xffff, _mm512_and_si512(_mm512_maskz_srlv_epi32(0xffff, _mm512_set1_epi32(int(v)), shifts),
                                 _mm512_set1_epi32(3)));
  } else {  // 3, 5 and 6 bits: two halves of 8
    const __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(codes8<Bits>(p)));
    return _mm512_castpd_ps(_mm512_maskz_insertf64x4(0xff, lo, _mm256_castps_pd(codes8<Bits>(p + Bits)), 1));
  }
}

// The AVX-512 tiles widen 16 4-bit codes (8 bytes: two words) from one 64-bit broadcast, each
// pair of lanes shifting the two words alike: lane 2i holds code i, lane 2i + 1 code 8 + i.
constexpr int kLanes16[16] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};

// A quantized [N, K] weight as the kernels read it.
struct QWeight {
  const uint8_t* codes;
  const Tensor &scales, &biases;  // [N, groups]
  int64_t K, group_size, groups, row_bytes;
};

// The scales and then the biases of rows [n, n + rows), in f32 ([2][rows][groups], per thread),
// so that the kernels broadcast each group's straight from memory rather than convert them in
// the loop.
const float* row_values(const QWeight& w, int64_t n, int64_t rows) {
  thread_local std::vector<float> values;
  values.resize(size_t(2 * rows * w.groups));
  ref::to_f32(w.scales, n * w.groups, rows * w.groups, values.data());
  ref::to_f32(w.biases, n * w.groups, rows * w.groups, values.data() + rows * w.groups);
  return values.data();
}

// Rows [n, n + R) × tokens [0, TT) of x (row stride K) into out (row stride ldo).
template <int Bits, int R, int TT>
void qgemv_tile(const QWeight& w, int64_t n, const float* x, float* out, int64_t ldo) {
  __m256 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t group_bytes = w.group_size * Bits / 8;
  const float* sb = row_values(w, n, R);
  for (int64_t g = 0; g < w.groups; ++g) {
    __m256 scale[R], bias[R];
    const uint8_t* p[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      scale[r] = _mm256_set1_ps(sb[r * w.groups + g]);
      bias[r] = _mm256_set1_ps(sb[(R + r) * w.groups + g]);
      p[r] = w.codes + (n + r) * w.row_bytes + g * group_bytes;
      // The next tile's rows, at the pace this one reads its own (see fast_linear.cpp).
      _mm_prefetch(reinterpret_cast<const char*>(p[r] + R * w.row_bytes), _MM_HINT_T0);
    }
    for (int64_t c = 0; c < w.group_size / 8; ++c) {
      const int64_t k = g * w.group_size + c * 8;
      __m256 wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) wv[r] = _mm256_fmadd_ps(codes8<Bits>(p[r] + c * Bits), scale[r], bias[r]);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + t * w.K + k);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) out[t * ldo + n + r] = hsum(acc[r][t]);
}

// The same with 512-bit vectors: 16 codes widened at a time, up to 8 tokens of accumulators.
template <int Bits, int R, int TT>
TESSERA_AVX512 void qgemv_tile_avx512(const QWeight& w, int64_t n, const float* x, float* out, int64_t ldo) {
  __m512 acc[R][TT];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  const int64_t group_bytes = w.group_size * Bits / 8;
  const float* sb = row_values(w, n, R);
  for (int64_t g = 0; g < w.groups; ++g) {
    __m512 scale[R], bias[R];
    const uint8_t* p[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      scale[r] = _mm512_set1_ps(sb[r * w.groups + g]);
      bias[r] = _mm512_set1_ps(sb[(R + r) * w.groups + g]);
      p[r] = w.codes + (n + r) * w.row_bytes + g * group_bytes;
      _mm_prefetch(reinterpret_cast<const char*>(p[r] + R * w.row_bytes), _MM_HINT_T0);
    }
    // 4 bits: a group's 16 possible values s * q + b are one register, and each code picks its
    // value from it (vpermps reads the low 4 bits of each lane), so widening 16 codes is a
    // broadcast, a shift and a permute. The codes arrive in the order of kLanes16 (x is permuted
    // to match by the caller).
    __m512 values[R];
    if constexpr (Bits == 4) {
      const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) values[r] = _mm512_fmadd_ps(q, scale[r], bias[r]);
    }
    for (int64_t c = 0; c < w.group_size / 16; ++c) {
      const int64_t k = g * w.group_size + c * 16;
      __m512 wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        if constexpr (Bits == 4) {
          uint64_t v;
          std::memcpy(&v, p[r] + c * 8, 8);
          const __m512i shifts = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
          const __m512i codes = _mm512_maskz_srlv_epi32(0xffff, _mm512_set1_epi64(int64_t(v)), shifts);
          wv[r] = _mm512_maskz_permutexvar_ps(0xffff, codes, values[r]);
        } else {
          wv[r] = _mm512_fmadd_ps(codes16<Bits>(p[r] + c * 2 * Bits), scale[r], bias[r]);
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512 xv = _mm512_loadu_ps(x + t * w.K + k);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < TT; ++t) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][t]);
      out[t * ldo + n + r] = hsum(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
    }
}

using TileFn = void (*)(const QWeight&, int64_t, const float*, float*, int64_t);

// tiles[tt - 1] handles tt tokens.
template <int Bits, int R, bool Wide, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> make_tiles(std::index_sequence<I...>) {
  if constexpr (Wide)
    return {qgemv_tile_avx512<Bits, R, int(I) + 1>...};
  else
    return {qgemv_tile<Bits, R, int(I) + 1>...};
}

// One token: 4 rows at a time (4 streams of codes in flight). More: 2 rows × up to 4 tokens of
// accumulators on AVX2 (16 registers), 2 rows × up to 8 on AVX-512 (32), tokens in groups as even
// as possible.
template <int Bits, bool Wide>
void qgemv_with(ThreadPool& pool, const float* x, const QWeight& w, int64_t T, int64_t N, float* out) {
  constexpr int64_t G = Wide ? 8 : 4;
  static constexpr auto quads = make_tiles<Bits, 4, Wide>(std::make_index_sequence<1>{});
  static constexpr auto pairs = make_tiles<Bits, 2, Wide>(std::make_index_sequence<G>{});
  static constexpr auto singles = make_tiles<Bits, 1, Wide>(std::make_index_sequence<G>{});
  const int64_t R = T == 1 ? 4 : 2;
  const int64_t grain = std::max<int64_t>(4, (16384 / w.row_bytes + 3) / 4 * 4);  // >= 16 KiB of codes
  Tensor permuted;  // 64-byte aligned as activations are: a load across two lines costs twice
  if constexpr (Wide && Bits == 4) {  // x in the order the 4-bit tiles widen codes (kLanes16)
    permuted = Tensor::empty(DType::F32, {T, w.K});
    for (int64_t i = 0; i < T * w.K; i += 16)
      for (int j = 0; j < 16; ++j) permuted.data<float>()[i + j] = x[i + kLanes16[j]];
    x = permuted.data<float>();
  }
  pool.parallel_for(N, grain, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1;) {
      const bool full = n + R <= n1;
      for (int64_t t0 = 0; t0 < T;) {
        const int64_t groups = (T - t0 + G - 1) / G, tt = (T - t0 + groups - 1) / groups;
        const TileFn tile = !full ? singles[size_t(tt - 1)] : T == 1 ? quads[0] : pairs[size_t(tt - 1)];
        tile(w, n, x + t0 * w.K, out + t0 * N, N);
        t0 += tt;
      }
      n += full ? R : 1;
    }
  });
}

template <int Bits>
void qgemv(ThreadPool& pool, const float* x, const QWeight& w, int64_t T, int64_t N, float* out) {
  if (isa() == Isa::Avx512 && w.group_size % 16 == 0)
    qgemv_with<Bits, true>(pool, x, w, T, N, out);
  else
    qgemv_with<Bits, false>(pool, x, w, T, N, out);
}

// Rows [n0, n1) of w dequantized into dst (row stride K).
template <int Bits>
void dequantize_rows(const QWeight& w, int64_t n0, int64_t n1, float* dst) {
  const int64_t group_bytes = w.group_size * Bits / 8, rows = n1 - n0;
  const float* sb = row_values(w, n0, rows);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t g = 0; g < w.groups; ++g) {
      const __m256 scale = _mm256_set1_ps(sb[(n - n0) * w.groups + g]);
      const __m256 bias = _mm256_set1_ps(sb[(rows + n - n0) * w.groups + g]);
      const uint8_t* p = w.codes + n * w.row_bytes + g * group_bytes;
      float* d = dst + (n - n0) * w.K + g * w.group_size;
      for (int64_t c = 0; c < w.group_size / 8; ++c)
        _mm256_storeu_ps(d + c * 8, _mm256_fmadd_ps(codes8<Bits>(p + c * Bits), scale, bias));
    }
}

template <class Fn>
void with_bits(int bits, Fn&& fn) {
  switch (bits) {
    case 2:
      return fn.template operator()<2>();
    case 3:
      return fn.template operator()<3>();
    case 4:
      return fn.template operator()<4>();
    case 5:
      return fn.template operator()<5>();
    case 6:
      return fn.template operator()<6>();
    case 8:
      return fn.template operator()<8>();
    default:
      throw Error("linear: " + std::to_string(bits) + "-bit codes are not supported");
  }
}

}  // namespace

void quantized_linear(ThreadPool& pool, const float* x, const Tensor& weight, int64_t T, float* out) {
  const Quantization& q = *weight.quantization();
  const int64_t N = weight.dim(0), K = weight.dim(1);
  TESSERA_CHECK(q.biases.dtype() == q.scales.dtype() && q.scales.numel() * q.group_size == weight.numel(),
                "linear: a quantized weight's scales and biases do not fit it");
  const QWeight w{weight.data<uint8_t>(), q.scales,         q.biases,      K,
                  q.group_size,           K / q.group_size, K * q.bits / 8};
  // The vector paths widen 8 codes at a time, so groups must be whole octets (MLX's 32, 64 and 128).
  const bool octets = q.group_size % 8 == 0;
  if (T <= kGemvMaxTokens && octets)
    return with_bits(q.bits, [&]<int Bits>() { qgemv<Bits>(pool, x, w, T, N, out); });

  // Each thread takes a range of rows and goes over it in blocks of about 512 KiB of f32 (at least
  // a panel of the AVX-512 kernel, 32 rows): dequantized into its own scratch, then multiplied by
  // the packed GEMM on this thread alone, so the block is read back from its cache and the
  // threads never wait for each other.
  const int64_t rows = std::max<int64_t>(32, (int64_t(1) << 17) / K / 32 * 32);
  pool.parallel_for(N, rows, [&](int64_t n0, int64_t n1) {
    thread_local ThreadPool alone(1);
    std::vector<float> block(size_t(std::min(rows, n1 - n0) * K)),
        partial(size_t(T * std::min(rows, n1 - n0)));
    for (int64_t b0 = n0; b0 < n1; b0 += rows) {
      const int64_t nb = std::min(rows, n1 - b0);
      if (octets)
        with_bits(q.bits, [&]<int Bits>() { dequantize_rows<Bits>(w, b0, b0 + nb, block.data()); });
      else
        dequantize(weight, b0 * K, nb * K, block.data());
      gemm<F32W>(alone, x, block.data(), T, K, nb, partial.data());
      for (int64_t t = 0; t < T; ++t)
        std::memcpy(out + t * N + b0, partial.data() + t * nb, size_t(nb) * sizeof(float));
    }
  });
}

}  // namespace tessera::cpu::fast

// AVX2/FMA/F16C building blocks shared by the CPU fast paths: widening loads and rounding stores
// per element dtype (weights, KV caches), horizontal sums and a vectorised exp.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace tessera::cpu::fast {

#define TESSERA_AVX512 __attribute__((target("avx512f")))

// Element types of weights and KV caches: load8 (load16) widens 8 (16) consecutive elements to f32
// exactly, load1 one; store8 / store1 round f32 to the type (nearest even, as f32_to_bf16 and
// f32_to_f16 do).
// load16 is AVX-512 and only called from functions compiled for it (see isa() in fast_ops.h); its
// maskz forms with a full mask compile to the plain instructions and avoid GCC 12's false
// -Wmaybe-uninitialized on the unmasked intrinsics.
struct F32W {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  TESSERA_AVX512 static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
  static void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static void store1(float* p, float v) { *p = v; }
};
struct BF16W {
  using T = uint16_t;
  // bf16 is the top half of an f32: zero-extend to 32 bits and shift left by 16.
  static __m256 load8(const uint16_t* p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  TESSERA_AVX512 static __m512 load16(const uint16_t* p) {
    __m512i v = _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, v, 16));
  }
  static float load1(const uint16_t* p) { return bf16_to_f32(*p); }
  // Adds 0x7fff plus the lowest kept bit, then keeps the top half; NaN keeps its top half with
  // the quiet bit set (the rounding could carry it into infinity).
  static void store8(uint16_t* p, __m256 v) {
    __m256i b = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    r = _mm256_srli_epi32(_mm256_blendv_epi8(r, _mm256_or_si256(b, _mm256_set1_epi32(0x400000)), nan), 16);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  static void store1(uint16_t* p, float v) { *p = f32_to_bf16(v); }
};
struct F16W {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  TESSERA_AVX512 static __m512 load16(const uint16_t* p) {
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
  static void store8(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void store1(uint16_t* p, float v) { *p = f32_to_f16(v); }
};

// Calls fn.template operator()<W>() with the element traits of a weight or cache dtype (F32, F16 or BF16).
template <class Fn>
void with_weight_type(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::F32: fn.template operator()<F32W>(); return;
    case DType::BF16: fn.template operator()<BF16W>(); return;
    case DType::F16: fn.template operator()<F16W>(); return;
    default: throw Error("unsupported weight dtype " + std::string(dtype_name(dt)));
  }
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) for 8 lanes, relative error ~2 ulp over the f32 range: exp(x) = 2^n * exp(r) with
// r = x - n*ln2 (ln2 split in two for an exact reduction) and a degree-6 polynomial for exp(r).
// Below -87.3 it returns 0 (the true value is subnormal or zero), above 88.7 +inf.
inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228f), lo = _mm256_set1_ps(-87.3365f);
  __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n: n in [-126, 128] after the clamp; n = 128 is split as 2^127 * 2 to stay finite.
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), over);
  return _mm256_andnot_ps(under, y);
}

}  // namespace tessera::cpu::fast

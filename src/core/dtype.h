// Element types of tensors, and conversions of the 16-bit float formats to and from f32.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tessera {

enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8, U32 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses a safetensors dtype string ("F32", "BF16", ...); throws on an unknown one.
DType dtype_from_safetensors(std::string_view name);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace tessera

// UTF-8 and Unicode helpers shared by the tokenizer stages.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::tok {

// Decodes one code point at s[i] of valid UTF-8; returns its byte length (1..4).
inline int utf8_decode(std::string_view s, size_t i, char32_t& cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  if (p[0] < 0x80) { cp = p[0]; return 1; }
  if (p[0] < 0xE0) { cp = ((p[0] & 0x1F) << 6) | (p[1] & 0x3F); return 2; }
  if (p[0] < 0xF0) { cp = ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F); return 3; }
  cp = ((p[0] & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  return 4;
}

// Byte length of the UTF-8 sequence a lead byte starts (1 for stray continuation bytes).
inline int utf8_len(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

void utf8_append(std::string& out, char32_t cp);

// Length of the longest prefix of s that is valid UTF-8.
size_t utf8_valid_prefix(std::string_view s);

// Like Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes U+FFFD.
std::string utf8_lossy(std::string_view s);

// Unicode classes with Rust's char:: semantics, which the reference uses.
bool is_whitespace(char32_t cp);    // char::is_whitespace (White_Space property)
bool is_numeric(char32_t cp);       // char::is_numeric (Nd, Nl, No)
bool is_punctuation(char32_t cp);   // ASCII punctuation or a Unicode P* category
bool is_word_char(char32_t cp);     // Rust regex's \w: alphabetic, marks, Nd, Pc, joiners

// GPT-2's byte-level alphabet: every byte maps to a printable code point.
struct ByteLevelAlphabet {
  std::array<char32_t, 256> byte_to_char{};
  std::array<std::string, 256> byte_to_utf8{};
  // char -> byte, for chars < 324 (the alphabet's largest code point is U+0143); -1 elsewhere.
  std::array<int16_t, 324> char_to_byte{};
  static const ByteLevelAlphabet& get();
  int byte_of(char32_t cp) const { return cp < char_to_byte.size() ? char_to_byte[cp] : -1; }
};

// Maps raw bytes to byte-level characters ("Ġ" for a space, ...).
std::string byte_level_encode(std::string_view raw);

}  // namespace tessera::tok

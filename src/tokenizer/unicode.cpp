#include "tokenizer/unicode.h"

#include <utf8proc.h>

namespace tessera::tok {

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

namespace {

// Length of the valid sequence at s[i], or 0 with `bad` set to the length of the maximal
// invalid subpart (the prefix of a valid sequence that was cut short, at least 1 byte).
size_t valid_seq(std::string_view s, size_t i, size_t& bad) {
  auto b = [&](size_t k) -> unsigned { return k < s.size() ? (unsigned char)s[k] : 0x100; };
  unsigned c = b(i);
  if (c < 0x80) return 1;
  unsigned lo = 0x80, hi = 0xBF;
  size_t need;
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c == 0xE0) need = 2, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) need = 2;
  else if (c == 0xED) need = 2, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) need = 2;
  else if (c == 0xF0) need = 3, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) need = 3;
  else if (c == 0xF4) need = 3, hi = 0x8F;
  else { bad = 1; return 0; }
  for (size_t k = 1; k <= need; ++k) {
    unsigned x = b(i + k);
    unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) { bad = k; return 0; }
  }
  return need + 1;
}

}  // namespace

size_t utf8_valid_prefix(std::string_view s) {
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    size_t n = valid_seq(s, i, bad);
    if (!n) break;
    i += n;
  }
  return i;
}

std::string utf8_lossy(std::string_view s) {
  size_t ok = utf8_valid_prefix(s);
  if (ok == s.size()) return std::string(s);
  std::string out(s.substr(0, ok));
  size_t i = ok, bad = 0;
  while (i < s.size()) {
    size_t n = valid_seq(s, i, bad);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_numeric(char32_t c) {
  auto cat = utf8proc_category(int32_t(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                       (c >= 0x7B && c <= 0x7E);
  auto cat = utf8proc_category(int32_t(c));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool is_word_char(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  // Symbols with the Alphabetic property: circled, parenthesized and squared Latin letters.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189))
    return true;
  auto cat = utf8proc_category(int32_t(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) || cat == UTF8PROC_CATEGORY_MN ||
         cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_ND ||
         cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_PC;
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet a = [] {
    ByteLevelAlphabet t;
    t.char_to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? char32_t(b) : next++;
      t.byte_to_char[b] = cp;
      utf8_append(t.byte_to_utf8[b], cp);
      t.char_to_byte[cp] = int16_t(b);
    }
    return t;
  }();
  return a;
}

std::string byte_level_encode(std::string_view raw) {
  const auto& a = ByteLevelAlphabet::get();
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) out += a.byte_to_utf8[c];
  return out;
}

}  // namespace tessera::tok

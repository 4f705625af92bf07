#include "grammar/code_points.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tessera::grammar {

namespace {

// The code points [lo, hi] as UTF-8: sequences of byte ranges, each byte free in its range
// (split where the encoded length changes, then where a trailing byte would not span 80-BF).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  for (uint32_t top : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= top && hi > top) {
      utf8_sequences(lo, top, out);
      utf8_sequences(top + 1, hi, out);
      return;
    }
  const int n = hi < 0x80 ? 1 : hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      utf8_sequences(lo, lo | m, out);
      utf8_sequences((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      utf8_sequences(lo, (hi & ~m) - 1, out);
      utf8_sequences(hi & ~m, hi, out);
      return;
    }
  }
  const std::string a = utf8(lo), b = utf8(hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(uint8_t(a[k]), uint8_t(b[k]));
  out.push_back(std::move(seq));
}

}  // namespace

std::string utf8(uint32_t cp) {
  std::string s;
  tok::utf8_append(s, char32_t(cp));
  return s;
}

uint32_t read_utf8(std::string_view s, size_t& i) {
  if (i >= s.size()) return kNotACharacter;
  const size_t n = size_t(tok::utf8_len(uint8_t(s[i])));
  if (tok::utf8_valid_prefix(s.substr(i, n)) != n || n == 0) return kNotACharacter;
  char32_t cp;
  i += size_t(tok::utf8_decode(s, i, cp));
  return uint32_t(cp);
}

bool plain_text(std::string_view s) {
  for (char c : s)
    if (uint8_t(c) < 0x20 || c == '"' || c == '\\') return false;
  return !s.empty() && tok::utf8_valid_prefix(s) == s.size();
}

std::vector<Range> normalized(std::vector<Range> rs) {
  std::vector<Range> cut;
  for (auto [a, b] : rs) {
    if (a <= 0xD7FF) cut.emplace_back(a, std::min(b, 0xD7FFu));
    if (b >= 0xE000) cut.emplace_back(std::max(a, 0xE000u), b);
  }
  std::sort(cut.begin(), cut.end());
  std::vector<Range> out;
  for (auto r : cut)
    if (!out.empty() && r.first <= out.back().second + 1) out.back().second = std::max(out.back().second, r.second);
    else out.push_back(r);
  return out;
}

std::vector<Range> complement(const std::vector<Range>& rs) {
  std::vector<Range> out;
  uint32_t next = 0;
  for (auto [a, b] : normalized(rs)) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return normalized(out);
}

std::vector<std::vector<Grammar::Symbol>> character_alternatives(Grammar& g, const std::vector<Range>& ranges,
                                                                bool json_string) {
  TESSERA_CHECK(!ranges.empty(), "grammar: a character set with no character");
  std::vector<std::vector<Grammar::Symbol>> alts;
  std::vector<Range> plain;
  for (auto [a, b] : normalized(ranges)) {
    // Inside a JSON string, '"', '\\' and the control characters are written as escapes.
    std::vector<uint32_t> special;
    for (uint32_t c = 0; c < 0x20; ++c) special.push_back(c);
    special.push_back('"'), special.push_back('\\');
    for (uint32_t c : special) {
      if (!json_string || c < a || c > b) continue;
      std::string e;
      switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\t': e = "\\t"; break;
        case '\r': e = "\\r"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default: {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          e = buf;
        }
      }
      alts.push_back(g.literal(e));
    }
    if (!json_string) {
      plain.emplace_back(a, b);
      continue;
    }
    // What is left of [a, b] without the escaped characters.
    for (uint32_t lo = a; lo <= b;) {
      while (lo <= b && (lo < 0x20 || lo == '"' || lo == '\\')) ++lo;
      uint32_t hi = lo;
      while (hi < b && !(hi + 1 < 0x20 || hi + 1 == '"' || hi + 1 == '\\')) ++hi;
      if (lo <= b) plain.emplace_back(lo, hi);
      lo = hi + 1;
    }
  }
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (auto [a, b] : plain) utf8_sequences(a, b, seqs);
  for (const auto& s : seqs) {
    std::vector<Grammar::Symbol> alt;
    for (auto [lo, hi] : s) alt.push_back(g.bytes(byte_range(lo, hi)));
    alts.push_back(std::move(alt));
  }
  return alts;
}

int character_rule(Grammar& g, const std::vector<Range>& ranges, bool json_string) {
  return g.new_rule(character_alternatives(g, ranges, json_string));
}

}  // namespace tessera::grammar

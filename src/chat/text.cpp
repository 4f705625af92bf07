#include "chat/text.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace tessera::chat::text {

char32_t decode(std::string_view s, size_t& pos) {
  auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  utf8proc_int32_t cp = 0;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + pos),
                            static_cast<utf8proc_ssize_t>(s.size() - pos), &cp);
  if (n <= 0) {
    ++pos;
    return 0xDC00 + b0;  // surrogateescape
  }
  pos += static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

void encode(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out.push_back(static_cast<char>(cp - 0xDC00));
  } else {
    utf8proc_uint8_t buf[4];
    auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
    out.append(reinterpret_cast<char*>(buf), static_cast<size_t>(n));
  }
}

std::u32string to_u32(std::string_view s) {
  std::u32string r;
  r.reserve(s.size());
  for (size_t p = 0; p < s.size();) r.push_back(decode(s, p));
  return r;
}

std::string from_u32(std::u32string_view s) {
  std::string r;
  r.reserve(s.size());
  for (char32_t c : s) encode(c, r);
  return r;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t p = 0; p < s.size(); ++n) {
    if (static_cast<unsigned char>(s[p]) < 0x80)
      ++p;
    else
      decode(s, p);
  }
  return n;
}

static const utf8proc_property_t* prop(char32_t cp) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
}

bool is_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  auto* p = prop(cp);
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

bool is_alpha(char32_t cp) {
  auto c = prop(cp)->category;
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
         c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}

bool is_digit(char32_t cp) { return prop(cp)->category == UTF8PROC_CATEGORY_ND; }
bool is_upper(char32_t cp) { return prop(cp)->category == UTF8PROC_CATEGORY_LU; }
bool is_lower(char32_t cp) { return prop(cp)->category == UTF8PROC_CATEGORY_LL; }

static bool is_cased(char32_t cp) {
  auto c = prop(cp)->category;
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp >= 0xDC80 && cp <= 0xDCFF) return false;
  switch (prop(cp)->category) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

static char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
static char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
static char32_t to_title(char32_t c) {
  if (c < 0x80) return to_upper(c);
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

template <class F>
static std::string map_cp(std::string_view s, F f) {
  std::string r;
  r.reserve(s.size());
  for (size_t p = 0; p < s.size();) encode(f(decode(s, p)), r);
  return r;
}

// Python's full case mappings that expand to several code points (SpecialCasing.txt, the common ones).
static const char* special_upper(char32_t c) {
  switch (c) {
    case 0xDF: return "SS";
    case 0x149: return "\u02BCN";
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05:
    case 0xFB06: return "ST";
    default: return nullptr;
  }
}
static const char* special_title(char32_t c) {
  switch (c) {
    case 0xDF: return "Ss";
    case 0xFB00: return "Ff";
    case 0xFB01: return "Fi";
    case 0xFB02: return "Fl";
    case 0xFB03: return "Ffi";
    case 0xFB04: return "Ffl";
    case 0xFB05:
    case 0xFB06: return "St";
    default: return nullptr;
  }
}

std::string upper(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (size_t p = 0; p < s.size();) {
    char32_t c = decode(s, p);
    if (auto* sp = c >= 0xDF ? special_upper(c) : nullptr)
      r += sp;
    else
      encode(to_upper(c), r);
  }
  return r;
}

std::string lower(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (size_t p = 0; p < s.size();) {
    char32_t c = decode(s, p);
    if (c == 0x130)
      r += "i\u0307";  // İ lowers to i + combining dot above
    else
      encode(to_lower(c), r);
  }
  return r;
}
std::string swapcase(std::string_view s) {
  return map_cp(s, [](char32_t c) { return is_upper(c) ? to_lower(c) : is_lower(c) ? to_upper(c) : c; });
}

static void append_title(char32_t c, std::string& out) {
  if (auto* sp = c >= 0xDF ? special_title(c) : nullptr)
    out += sp;
  else
    encode(to_title(c), out);
}

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t p = 0;
  std::string r;
  append_title(decode(s, p), r);
  return r + lower(s.substr(p));
}

std::string py_title(std::string_view s) {
  bool prev_cased = false;
  std::string r;
  for (size_t p = 0; p < s.size();) {
    char32_t c = decode(s, p);
    if (prev_cased)
      encode(to_lower(c), r);
    else
      append_title(c, r);
    prev_cased = is_cased(c);
  }
  return r;
}

std::string jinja_title(std::string_view s) {
  // Each word (after a run of whitespace or -([{<) gets item[0].upper() + item[1:].lower().
  bool word_start = true;
  std::string r;
  r.reserve(s.size());
  for (size_t p = 0; p < s.size();) {
    size_t q = p;
    char32_t c = decode(s, q);
    bool sep = is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string_view one = s.substr(p, q - p);
    r += sep ? std::string(one) : word_start ? upper(one) : lower(one);
    word_start = sep;
    p = q;
  }
  return r;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  auto u = to_u32(s);
  std::u32string set;
  if (chars) set = to_u32(*chars);
  auto drop = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return from_u32(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      auto f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  auto u = to_u32(s);
  size_t i = 0, n = u.size();
  while (true) {
    while (i < n && is_space(u[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = n;
      while (e > i && is_space(u[e - 1])) --e;
      out.push_back(from_u32(std::u32string_view(u).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < n && !is_space(u[j])) ++j;
    out.push_back(from_u32(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      auto f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    auto u = to_u32(s);
    size_t e = u.size();
    while (true) {
      while (e > 0 && is_space(u[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && is_space(u[b])) ++b;
        out.push_back(from_u32(std::u32string_view(u).substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(u[b - 1])) --b;
      out.push_back(from_u32(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  auto u = to_u32(s);
  size_t start = 0, i = 0;
  while (i < u.size()) {
    char32_t c = u[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++i;
      continue;
    }
    size_t eol = i + ((c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1);
    out.push_back(from_u32(std::u32string_view(u).substr(start, (keepends ? eol : i) - start)));
    start = i = eol;
  }
  if (start < u.size()) out.push_back(from_u32(std::u32string_view(u).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view rep, int64_t count) {
  std::string r;
  if (old.empty()) {  // Python inserts rep before every code point and at the end
    int64_t n = 0;
    size_t p = 0;
    while (p < s.size()) {
      if (count < 0 || n < count) r += rep, ++n;
      size_t q = p;
      decode(s, q);
      r.append(s.substr(p, q - p));
      p = q;
    }
    if (count < 0 || n < count) r += rep;
    return r;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    auto f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    r.append(s.substr(pos, f - pos));
    r.append(rep);
    pos = f + old.size();
    ++n;
  }
  r.append(s.substr(pos));
  return r;
}

std::string html_escape(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&#34;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string r(1, q);
  char buf[16];
  for (size_t p = 0; p < s.size();) {
    char32_t c = decode(s, p);
    if (c == static_cast<char32_t>(q) || c == '\\') {
      r.push_back('\\');
      r.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      r += "\\n";
    } else if (c == '\r') {
      r += "\\r";
    } else if (c == '\t') {
      r += "\\t";
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      std::snprintf(buf, sizeof buf, "\\udc%02x", static_cast<unsigned>(c & 0xFF));
      r += buf;
    } else if (c < 0x7F ? c < 0x20 : !is_printable(c)) {
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      r += buf;
    } else {
      encode(c, r);
    }
  }
  r.push_back(q);
  return r;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, laid out the way Python's repr does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  auto epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  int exp10 = std::stoi(sci.substr(epos + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int decpt = exp10 + 1;
  std::string out = neg ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(decpt));
      out += '.';
      out.append(digits, static_cast<size_t>(decpt));
    }
  } else {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    std::snprintf(buf, sizeof buf, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out += buf;
  }
  return out;
}

void json_escape(std::string_view s, std::string& out, bool ensure_ascii) {
  out.push_back('"');
  if (ensure_ascii) {
    char buf[16];
    for (size_t p = 0; p < s.size();) {
      char32_t c = decode(s, p);
      if (c == '"') out += "\\\"";
      else if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c == '\b') out += "\\b";
      else if (c == '\f') out += "\\f";
      else if (c >= 0x20 && c < 0x7F) out.push_back(static_cast<char>(c));
      else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      } else {
        unsigned v = static_cast<unsigned>(c) - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        out += buf;
      }
    }
    out.push_back('"');
    return;
  }
  char buf[8];
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
    }
  }
  out.append(s.substr(run));
  out.push_back('"');
}

}  // namespace tessera::chat::text

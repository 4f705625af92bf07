#include "tokenizer/json_scan.h"

#include <cstring>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tessera::tok {

void JsonScanner::fail(const std::string& what) {
  throw Error(where_ + ": invalid JSON at byte " + std::to_string(i_) + ": " + what);
}


namespace {
int hex4(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return -1;
  int v = 0;
  for (size_t k = i; k < i + 4; ++k) {
    char c = s[k];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}
}  // namespace

std::string_view JsonScanner::escaped_string(size_t start, std::string& buf) {
  if (i_ >= s_.size()) fail("unterminated string");
  buf.assign(s_.substr(start, i_ - start));
  while (true) {
    if (i_ >= s_.size()) fail("unterminated string");
    char c = s_[i_++];
    if (c == '"') break;
    if (c != '\\') {
      buf += c;
      continue;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    char e = s_[i_++];
    switch (e) {
      case '"': buf += '"'; break;
      case '\\': buf += '\\'; break;
      case '/': buf += '/'; break;
      case 'b': buf += '\b'; break;
      case 'f': buf += '\f'; break;
      case 'n': buf += '\n'; break;
      case 'r': buf += '\r'; break;
      case 't': buf += '\t'; break;
      case 'u': {
        int cp = hex4(s_, i_);
        if (cp < 0) fail("bad \\u escape");
        i_ += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && i_ + 6 <= s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
          int lo = hex4(s_, i_ + 2);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            i_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogate
        utf8_append(buf, char32_t(cp));
        break;
      }
      default: fail("bad escape");
    }
  }
  return buf;
}

long long JsonScanner::integer() {
  skip_ws();
  size_t start = i_;
  bool neg = i_ < s_.size() && s_[i_] == '-';
  if (neg) ++i_;
  long long v = 0;
  while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') v = v * 10 + (s_[i_++] - '0');
  if (i_ == start + neg) fail("expected an integer");
  if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
    // Scores or ids written as floats: keep the integer part, skip the rest.
    while (i_ < s_.size() && std::string_view("0123456789.eE+-").find(s_[i_]) != std::string_view::npos) ++i_;
  }
  return neg ? -v : v;
}

void JsonScanner::skip_string() {
  ++i_;  // opening quote
  while (true) {
    const void* q = std::memchr(s_.data() + i_, '"', s_.size() - i_);
    if (!q) fail("unterminated string");
    size_t at = size_t(static_cast<const char*>(q) - s_.data());
    size_t backslashes = 0;
    while (at - backslashes > i_ && s_[at - backslashes - 1] == '\\') ++backslashes;
    i_ = at + 1;
    if (backslashes % 2 == 0) return;  // an odd count escapes this quote
  }
}

std::string_view JsonScanner::skip_value() {
  skip_ws();
  size_t start = i_;
  char c = peek();
  if (c == '"') {
    skip_string();
  } else if (c == '{' || c == '[') {
    int depth = 0;
    while (i_ < s_.size()) {
      char x = s_[i_];
      if (x == '"') {
        skip_string();
        continue;
      }
      ++i_;
      if (x == '{' || x == '[') ++depth;
      else if ((x == '}' || x == ']') && --depth == 0) break;
    }
    if (depth) fail("unterminated value");
  } else {
    while (i_ < s_.size() && std::string_view(",}] \n\r\t").find(s_[i_]) == std::string_view::npos) ++i_;
    if (i_ == start) fail("expected a value");
  }
  return s_.substr(start, i_ - start);
}

}  // namespace tessera::tok

#include "chat/lexer.h"

#include <algorithm>
#include <cstring>

#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string src, const LexerOptions& o) : src_(std::move(src)), opts_(o) {
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t n = src_.size();
    bool line_starting = true;
    while (pos_ < n) {
      size_t i = find_tag(pos_);
      if (i == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        break;
      }
      char kind = src_[i + 1];
      size_t j = i + 2;
      char mod = (j < n && (src_[j] == '-' || src_[j] == '+')) ? src_[j] : 0;
      if (mod) ++j;
      std::string text = src_.substr(pos_, i - pos_);
      if (mod == '-') {
        size_t e = text.size();
        while (e > 0 && is_ws(text[e - 1])) --e;
        text.resize(e);
      } else if (mod != '+' && opts_.lstrip_blocks && kind != '{') {
        size_t l = text.rfind('\n');
        l = l == std::string::npos ? 0 : l + 1;
        if ((l > 0 || line_starting) && l < text.size() &&
            std::all_of(text.begin() + static_cast<long>(l), text.end(), [](char c) { return is_ws(c); }))
          text.resize(l);
      }
      emit_text(std::move(text), pos_);
      if (kind == '#') {
        size_t e = src_.find("#}", j);
        if (e == std::string::npos) fail("Missing end of comment tag", i);
        pos_ = e + 2;
        finish_tag(e > j && src_[e - 1] == '-', false);
      } else if (kind == '%' && try_raw(i, j)) {
      } else {
        lex_tag(kind == '%' ? Tok::BlockBegin : Tok::VarBegin, i, j);
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    push(Tok::Eof, "", src_.size());
    return std::move(out_);
  }

 private:
  std::string src_;
  LexerOptions opts_;
  std::vector<size_t> line_starts_{0};
  std::vector<Token> out_;
  size_t pos_ = 0;

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  void position(size_t off, int& line, int& col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off) - 1;
    line = static_cast<int>(it - line_starts_.begin()) + 1;
    col = static_cast<int>(off - *it) + 1;
  }

  [[noreturn]] void fail(const std::string& msg, size_t off) const {
    int line, col;
    position(off, line, col);
    throw TemplateError("TemplateSyntaxError", msg, line, col);
  }

  Token& push(Tok t, std::string v, size_t off) {
    Token tok{t, std::move(v)};
    position(off, tok.line, tok.column);
    out_.push_back(std::move(tok));
    return out_.back();
  }

  void emit_text(std::string text, size_t off) {
    if (!text.empty()) push(Tok::Text, std::move(text), off);
  }

  // After a tag's closing delimiter: `-` strips all following whitespace; otherwise trim_blocks drops
  // one newline after block and comment tags (a `+` before the delimiter keeps it).
  void finish_tag(bool strip, bool keep) {
    if (strip) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) ++pos_;
    } else if (opts_.trim_blocks && !keep && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  static size_t skip_ws(const std::string& s, size_t p) {
    while (p < s.size() && is_ws(s[p])) ++p;
    return p;
  }

  // Matches `name [-+]%}` at p (after the opening `{%` and its modifier); returns the end or npos.
  size_t match_word_tag(size_t p, const char* word, bool& strip_after, bool& keep_after) const {
    p = skip_ws(src_, p);
    size_t len = std::strlen(word);
    if (src_.compare(p, len, word) != 0) return std::string::npos;
    p = skip_ws(src_, p + len);
    strip_after = keep_after = false;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) {
      (src_[p] == '-' ? strip_after : keep_after) = true;
      ++p;
    }
    if (src_.compare(p, 2, "%}") != 0) return std::string::npos;
    return p + 2;
  }

  bool try_raw(size_t tag_start, size_t j) {
    bool strip_after, keep_after;
    size_t body = match_word_tag(j, "raw", strip_after, keep_after);
    if (body == std::string::npos) return false;
    for (size_t e = src_.find("{%", body); e != std::string::npos; e = src_.find("{%", e + 2)) {
      size_t k = e + 2;
      bool strip_before = k < src_.size() && src_[k] == '-';
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) ++k;
      bool s2, k2;
      size_t end = match_word_tag(k, "endraw", s2, k2);
      if (end == std::string::npos) continue;
      std::string text = src_.substr(body, e - body);
      if (strip_after) text.erase(0, skip_ws(text, 0));
      if (strip_before) {
        size_t t = text.size();
        while (t > 0 && is_ws(text[t - 1])) --t;
        text.resize(t);
      }
      emit_text(std::move(text), body);
      pos_ = end;
      finish_tag(s2, k2);
      return true;
    }
    fail("Missing end of raw directive", tag_start);
  }

  void lex_tag(Tok begin, size_t tag_start, size_t p) {
    push(begin, "", tag_start);
    bool block = begin == Tok::BlockBegin;
    int depth = 0;
    size_t n = src_.size();
    while (true) {
      p = skip_ws(src_, p);
      if (p >= n) fail(block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'", tag_start);
      if (depth == 0) {
        const char* close = block ? "%}" : "}}";
        bool strip = src_[p] == '-' && src_.compare(p + 1, 2, close) == 0;
        bool keep = block && src_[p] == '+' && src_.compare(p + 1, 2, close) == 0;
        if (strip || keep || src_.compare(p, 2, close) == 0) {
          push(block ? Tok::BlockEnd : Tok::VarEnd, "", p);
          pos_ = p + (strip || keep ? 3 : 2);
          if (block)
            finish_tag(strip, keep);
          else if (strip)
            finish_tag(true, false);
          return;
        }
      }
      char c = src_[p];
      if (is_name_start(c)) {
        size_t e = p;
        while (e < n && is_name_char(src_[e])) ++e;
        push(Tok::Name, src_.substr(p, e - p), p);
        p = e;
      } else if (is_digit(c)) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* ops2[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (auto* o : ops2)
          if (src_.compare(p, 2, o) == 0) op = o;
        if (op.empty()) {
          if (!std::strchr("+-/*%~()[]{},.:|=<>;", c) || c == 0) fail(std::string("unexpected char '") + c + "'", p);
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) fail("unexpected '" + op + "'", p);
          --depth;
        }
        push(Tok::Op, op, p);
        p += op.size();
      }
    }
  }

  size_t lex_number(size_t p) {
    size_t n = src_.size(), s = p;
    auto digits = [&](size_t q) {
      while (q < n && (is_digit(src_[q]) || (src_[q] == '_' && q + 1 < n && is_digit(src_[q + 1])))) ++q;
      return q;
    };
    bool after_dot = !out_.empty() && out_.back().type == Tok::Op && out_.back().value == ".";
    size_t e = digits(p);
    bool is_float = false;
    if (!after_dot && e + 1 < n && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < n && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n && is_digit(src_[q])) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string lit;
    for (size_t q = s; q < e; ++q)
      if (src_[q] != '_') lit += src_[q];
    auto& tok = push(is_float ? Tok::Float : Tok::Int, lit, s);
    try {
      if (is_float)
        tok.fval = std::stod(lit);
      else
        tok.ival = std::stoll(lit);
    } catch (const std::exception&) {
      fail("number literal out of range: " + lit, s);
    }
    return e;
  }

  size_t lex_string(size_t p) {
    char q = src_[p];
    size_t n = src_.size(), s = p++;
    std::string v;
    while (true) {
      if (p >= n) fail("unexpected end of string", s);
      char c = src_[p];
      if (c == q) break;
      if (c != '\\' || p + 1 >= n) {
        v += c;
        ++p;
        continue;
      }
      char e = src_[p + 1];
      p += 2;
      auto hex = [&](int digits) {
        if (p + static_cast<size_t>(digits) > n) fail("truncated \\x/\\u escape", p);
        uint32_t cp = 0;
        for (int k = 0; k < digits; ++k) {
          char h = src_[p++];
          cp <<= 4;
          if (h >= '0' && h <= '9') cp |= static_cast<uint32_t>(h - '0');
          else if (h >= 'a' && h <= 'f') cp |= static_cast<uint32_t>(h - 'a' + 10);
          else if (h >= 'A' && h <= 'F') cp |= static_cast<uint32_t>(h - 'A' + 10);
          else fail("truncated \\x/\\u escape", p);
        }
        text::encode(cp, v);
      };
      switch (e) {
        case '\n': break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'n': v += '\n'; break;
        case 'r': v += '\r'; break;
        case 't': v += '\t'; break;
        case 'v': v += '\v'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < n && src_[p] >= '0' && src_[p] <= '7'; ++k)
              cp = cp * 8 + static_cast<uint32_t>(src_[p++] - '0');
            text::encode(cp, v);
          } else {
            v += '\\';
            v += e;
          }
      }
    }
    push(Tok::String, std::move(v), s);
    return p + 1;
  }
};

// jinja2 normalises \r\n and \r to \n and drops one trailing newline before lexing.
std::string normalize(const std::string& src) {
  std::string s;
  s.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      s += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      s += src[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexerOptions& opts) {
  return Lexer(normalize(source), opts).run();
}

}  // namespace tessera::chat

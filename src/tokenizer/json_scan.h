// A minimal forward-only JSON reader for the large parts of tokenizer.json (vocab, merges),
// several times faster than building a DOM; small sections are handed to nlohmann::json.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tessera::tok {

class JsonScanner {
 public:
  JsonScanner(std::string_view text, std::string where) : s_(text), where_(std::move(where)) {}

  void skip_ws() {
    // Pretty-printed files indent every merge: skip runs of spaces 8 bytes at a time.
    while (i_ + 8 <= s_.size()) {
      uint64_t w;
      std::memcpy(&w, s_.data() + i_, 8);
      if (w != 0x2020202020202020ull) break;
      i_ += 8;
    }
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  char peek() {
    skip_ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  // Consumes c if it is next.
  bool accept(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  // Reads a string; returns a view into the text when it holds no escapes, else into `buf`.
  std::string_view string(std::string& buf) {
    expect('"');
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\\') ++i_;
    if (i_ < s_.size() && s_[i_] == '"') return s_.substr(start, i_++ - start);
    return escaped_string(start, buf);
  }
  long long integer();
  // Skips any value and returns its raw text.
  std::string_view skip_value();
  // Iterates "key": value pairs of an object; f(key) must consume the value.
  template <class F>
  void object(F&& f) {
    expect('{');
    if (accept('}')) return;
    std::string buf;
    do {
      std::string_view key = string(buf);
      std::string owned(key);
      expect(':');
      f(owned);
    } while (accept(','));
    expect('}');
  }
  // Like object() without copying keys: f(key, escaped) gets a view that stays valid until the
  // next key when `escaped` (the key held escapes), else as long as the text.
  template <class F>
  void object_views(F&& f) {
    expect('{');
    if (accept('}')) return;
    std::string buf;
    do {
      size_t before = i_;
      std::string_view key = string(buf);
      bool escaped = key.data() == buf.data() && i_ != before;
      expect(':');
      f(key, escaped);
    } while (accept(','));
    expect('}');
  }
  // Iterates array elements; f() must consume each element.
  template <class F>
  void array(F&& f) {
    expect('[');
    if (accept(']')) return;
    do f();
    while (accept(','));
    expect(']');
  }
  [[noreturn]] void fail(const std::string& what);
  size_t remaining() const { return s_.size() - i_; }

 private:
  std::string_view escaped_string(size_t start, std::string& buf);
  void skip_string();
  std::string_view s_;
  size_t i_ = 0;
  std::string where_;
};

}  // namespace tessera::tok

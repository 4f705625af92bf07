#include "tokenizer/normalizer.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "core/error.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tessera::tok {

namespace {

using json = nlohmann::json;

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(int options) : options_(options) {}
  void normalize(std::string& text) const override {
    if (text.empty()) return;
    utf8proc_uint8_t* out = nullptr;
    auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()), &out,
                          utf8proc_option_t(options_));
    if (n < 0) throw Error(std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
    text.assign(reinterpret_cast<char*>(out), size_t(n));
    std::free(out);
  }

 private:
  int options_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    char32_t cp;
    for (size_t i = 0; i < text.size();) {
      i += utf8_decode(text, i, cp);
      if (cp == 0x130)  // Rust's char::to_lowercase: 'İ' -> "i\u0307"
        out += "i\xCC\x87";
      else
        utf8_append(out, char32_t(utf8proc_tolower(int32_t(cp))));
    }
    text = std::move(out);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t b = 0, e = text.size();
    char32_t cp;
    if (left_)
      while (b < e) {
        int n = utf8_decode(text, b, cp);
        if (!is_whitespace(cp)) break;
        b += n;
      }
    if (right_)
      while (e > b) {
        size_t s = e - 1;
        while (s > b && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        utf8_decode(text, s, cp);
        if (!is_whitespace(cp)) break;
        e = s;
      }
    text = text.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

// Drops combining marks (categories Mn, Mc, Me), as after NFD.
class StripAccents : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    char32_t cp;
    for (size_t i = 0; i < text.size();) {
      int n = utf8_decode(text, i, cp);
      auto cat = utf8proc_category(int32_t(cp));
      if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC && cat != UTF8PROC_CATEGORY_ME) out.append(text, i, n);
      i += n;
    }
    text = std::move(out);
  }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string s) : s_(std::move(s)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, s_);
  }

 private:
  std::string s_;
};

class Replace : public Normalizer {
 public:
  Replace(const json& j) : pattern_(j.at("pattern"), "normalizer Replace"), content_(j.at("content").get<std::string>()) {}
  void normalize(std::string& text) const override {
    std::vector<std::pair<size_t, size_t>> m;
    pattern_.find_all(text, m);
    if (m.empty()) return;
    std::string out;
    out.reserve(text.size() + m.size() * content_.size());
    size_t prev = 0;
    for (auto [b, e] : m) {
      out.append(text, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// BERT's normalizer: drop control chars, map whitespace to ' ', pad CJK ideographs with
// spaces, optionally strip accents and lowercase.
class BertNormalizer : public Normalizer {
 public:
  explicit BertNormalizer(const json& j)
      : clean_(j.value("clean_text", true)),
        chinese_(j.value("handle_chinese_chars", true)),
        lowercase_(j.value("lowercase", true)) {
    auto sa = j.find("strip_accents");
    strip_accents_ = sa == j.end() || sa->is_null() ? lowercase_ : sa->get<bool>();
  }
  void normalize(std::string& text) const override {
    std::string out;
    char32_t cp;
    for (size_t i = 0; i < text.size();) {
      int n = utf8_decode(text, i, cp);
      i += n;
      if (clean_) {
        auto cat = utf8proc_category(int32_t(cp));
        bool control = cp != '\t' && cp != '\n' && cp != '\r' &&
                       (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CN ||
                        cat == UTF8PROC_CATEGORY_CO);
        if (cp == 0 || cp == 0xFFFD || control) continue;
        if (is_whitespace(cp)) cp = ' ';
      }
      if (chinese_ && is_cjk(cp)) {
        out += ' ';
        utf8_append(out, cp);
        out += ' ';
      } else {
        utf8_append(out, cp);
      }
    }
    if (strip_accents_) {
      UnicodeForm(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE).normalize(out);
      StripAccents().normalize(out);
    }
    if (lowercase_) Lowercase().normalize(out);
    text = std::move(out);
  }

 private:
  static bool is_cjk(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
  }
  bool clean_, chinese_, lowercase_, strip_accents_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  constexpr int kStable = UTF8PROC_STABLE;
  if (type == "NFC") return std::make_unique<UnicodeForm>(kStable | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeForm>(kStable | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(kStable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(kStable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip") return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "Replace") return std::make_unique<Replace>(j);
  if (type == "BertNormalizer") return std::make_unique<BertNormalizer>(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (auto& p : j.at("normalizers"))
      if (auto n = make_normalizer(p)) parts.push_back(std::move(n));
    if (parts.empty()) return nullptr;
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported normalizer type '" + type + "'");
}

}  // namespace tessera::tok

#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tessera::tok {

namespace {

using json = nlohmann::json;

// Byte-level chars back to bytes; a token holding any other char keeps its UTF-8 bytes.
// Invalid UTF-8 in the result becomes U+FFFD.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    const auto& a = ByteLevelAlphabet::get();
    std::string bytes, tok_bytes;
    for (const auto& t : tokens) {
      tok_bytes.clear();
      bool all = true;
      char32_t cp;
      for (size_t i = 0; i < t.size() && all;) {
        i += utf8_decode(t, i, cp);
        int b = a.byte_of(cp);
        if (b < 0) all = false;
        else tok_bytes += char(b);
      }
      bytes += all ? tok_bytes : t;
    }
    tokens.assign(1, raw ? bytes : utf8_lossy(bytes));
  }
};

// "<0xAB>" tokens become bytes; a run of them that is not valid UTF-8 becomes one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t n_bytes = 0;
    auto flush = [&] {
      if (!n_bytes) return;
      if (raw || utf8_valid_prefix(bytes) == bytes.size()) {
        out.push_back(bytes);
      } else {
        std::string rep;
        for (size_t i = 0; i < n_bytes; ++i) rep += "\xEF\xBF\xBD";
        out.push_back(rep);
      }
      bytes.clear();
      n_bytes = 0;
    };
    for (auto& t : tokens) {
      int b = byte_token(t);
      if (b >= 0) {
        bytes += char(b);
        ++n_bytes;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
  static int byte_token(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; ++k) {
      char c = t[k];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::string all;
    for (auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing `content` chars of each token.
class StripDecoder : public Decoder {
 public:
  explicit StripDecoder(const json& j) : start_(j.value("start", 0)), stop_(j.value("stop", 0)) {
    std::string c = j.at("content").get<std::string>();
    if (!c.empty()) utf8_decode(c, 0, content_);
  }
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    if (raw) return;
    for (auto& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;
      char32_t cp;
      for (size_t i = 0; i < t.size();) {
        size_t at = i;
        i += utf8_decode(t, i, cp);
        chars.emplace_back(at, cp);
      }
      size_t b = 0, e = chars.size();
      while (b < size_t(start_) && b < e && chars[b].second == content_) ++b;
      size_t cut = 0;
      while (cut < size_t(stop_) && e > b && chars[e - 1].second == content_) --e, ++cut;
      size_t from = b < chars.size() ? chars[b].first : t.size();
      size_t to = e < chars.size() ? chars[e].first : t.size();
      t = t.substr(from, to - from);
    }
  }

 private:
  char32_t content_ = 0;
  int start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  explicit ReplaceDecoder(const json& j) : pattern_(j.at("pattern"), "decoder Replace"), content_(j.at("content").get<std::string>()) {}
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    std::vector<std::pair<size_t, size_t>> m;
    for (auto& t : tokens) {
      m.clear();
      pattern_.find_all(t, m);
      if (m.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : m) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// SentencePiece's "▁" back to spaces; the first token loses its prepended ones.
class MetaspaceDecoder : public Decoder {
 public:
  explicit MetaspaceDecoder(const json& j) {
    replacement_ = j.value("replacement", "\xE2\x96\x81");
    std::string scheme = j.value("prepend_scheme", "");
    strip_first_ = scheme.empty() ? j.value("add_prefix_space", true) : scheme != "never";
  }
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_ && !raw)) out += ' ';
          k += replacement_.size();
        } else {
          out += t[k++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens, bool raw) const override {
    for (auto& p : parts_) p->decode_chain(tokens, raw);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return std::make_unique<StripDecoder>(j);
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(j);
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& d : j.at("decoders"))
      if (auto p = make_decoder(d)) parts.push_back(std::move(p));
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported decoder type '" + type + "'");
}

}  // namespace tessera::tok

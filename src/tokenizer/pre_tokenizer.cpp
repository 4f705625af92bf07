#include "tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/pattern.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace tessera::tok {

using json = nlohmann::json;
using Ranges = std::vector<std::pair<size_t, size_t>>;

void split_ranges(size_t len, const Ranges& matches, bool invert, SplitBehavior behavior, Ranges& out) {
  // (range, is_match) covering the whole piece.
  struct Part {
    size_t b, e;
    bool match;
  };
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < len || len == 0) parts.push_back({prev, len, invert});

  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.emplace_back(b, e);
  };
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (auto& p : parts) emit(p.b, p.e);
      break;
    case SplitBehavior::Removed:
      for (auto& p : parts)
        if (!p.match) emit(p.b, p.e);
      break;
    case SplitBehavior::MergedWithPrevious: {
      std::vector<std::pair<size_t, size_t>> acc;
      bool prev_match = false;
      for (auto& p : parts) {
        if (p.match && !prev_match && !acc.empty()) acc.back().second = p.e;
        else acc.emplace_back(p.b, p.e);
        prev_match = p.match;
      }
      for (auto [b, e] : acc) emit(b, e);
      break;
    }
    case SplitBehavior::MergedWithNext: {
      std::vector<std::pair<size_t, size_t>> acc;
      bool prev_match = false;
      for (size_t k = parts.size(); k-- > 0;) {
        auto& p = parts[k];
        if (p.match && !prev_match && !acc.empty()) acc.back().first = p.b;
        else acc.emplace_back(p.b, p.e);
        prev_match = p.match;
      }
      for (size_t k = acc.size(); k-- > 0;) emit(acc[k].first, acc[k].second);
      break;
    }
    case SplitBehavior::Contiguous: {
      std::vector<std::pair<size_t, size_t>> acc;
      bool prev_match = false;
      for (auto& p : parts) {
        if (p.match == prev_match && !acc.empty()) acc.back().second = p.e;
        else acc.emplace_back(p.b, p.e);
        prev_match = p.match;
      }
      for (auto [b, e] : acc) emit(b, e);
      break;
    }
  }
}

namespace {

SplitBehavior parse_behavior(const json& j, SplitBehavior dflt) {
  if (!j.contains("behavior")) return dflt;
  std::string b = j["behavior"].get<std::string>();
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  throw Error("tokenizer.json: unknown split behavior '" + b + "'");
}

// Re-splits every word with `find` (which appends match ranges of a word) and `behavior`.
template <class Find>
void split_words(Words& w, bool invert, SplitBehavior behavior, Find&& find) {
  std::vector<Words::Span> spans;
  spans.reserve(w.spans.size() * 2);
  Ranges matches, pieces;
  for (auto& s : w.spans) {
    matches.clear();
    pieces.clear();
    find(w.view(s), matches);
    split_ranges(s.end - s.begin, matches, invert, behavior, pieces);
    for (auto [b, e] : pieces) spans.push_back({uint32_t(s.begin + b), uint32_t(s.begin + e), s.at_start && b == 0});
  }
  w.spans = std::move(spans);
}

// Each char satisfying `pred` is one match, as with the reference's char-predicate patterns.
template <class Pred>
auto char_matcher(Pred pred) {
  return [pred](std::string_view s, Ranges& out) {
    char32_t cp;
    for (size_t i = 0; i < s.size();) {
      int n = utf8_decode(s, i, cp);
      if (pred(cp)) out.emplace_back(i, i + n);
      i += n;
    }
  };
}

class SplitPre : public PreTokenizer {
 public:
  explicit SplitPre(const json& j)
      : pattern_(j.at("pattern"), "pre_tokenizer Split"),
        behavior_(parse_behavior(j, SplitBehavior::Isolated)),
        invert_(j.value("invert", false)) {}
  void apply(Words& w) const override {
    split_words(w, invert_, behavior_, [&](std::string_view s, Ranges& out) { pattern_.find_all(s, out); });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class RegexPre : public PreTokenizer {
 public:
  RegexPre(const std::string& re, bool invert, SplitBehavior b, const std::string& where)
      : re_(re, where), invert_(invert), behavior_(b) {}
  void apply(Words& w) const override {
    split_words(w, invert_, behavior_, [&](std::string_view s, Ranges& out) { re_.find_all(s, out); });
  }

 private:
  Regex re_;
  bool invert_;
  SplitBehavior behavior_;
};

template <class Pred>
class CharSplitPre : public PreTokenizer {
 public:
  CharSplitPre(Pred pred, SplitBehavior b) : pred_(pred), behavior_(b) {}
  void apply(Words& w) const override { split_words(w, false, behavior_, char_matcher(pred_)); }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};
template <class Pred>
std::unique_ptr<PreTokenizer> char_split(Pred pred, SplitBehavior b) {
  return std::make_unique<CharSplitPre<Pred>>(pred, b);
}

// Rewrites each word through `f(word, at_start, out)`, keeping the spans in order.
template <class F>
void rewrite_words(Words& w, F&& f) {
  Words out;
  out.text.reserve(w.text.size() + w.spans.size() * 3);
  out.spans.reserve(w.spans.size());
  for (auto& s : w.spans) {
    uint32_t b = uint32_t(out.text.size());
    f(w.view(s), s.at_start, out.text);
    out.spans.push_back({b, uint32_t(out.text.size()), s.at_start});
  }
  w = std::move(out);
}

const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(const json& j, bool map_bytes)
      : add_prefix_space_(j.value("add_prefix_space", true)), map_bytes_(map_bytes) {
    if (j.value("use_regex", true)) regex_ = std::make_unique<Regex>(kGpt2Pattern, "pre_tokenizer ByteLevel");
  }
  void apply(Words& w) const override {
    if (add_prefix_space_)
      rewrite_words(w, [](std::string_view s, bool, std::string& out) {
        if (s.empty() || s[0] != ' ') out += ' ';
        out += s;
      });
    if (regex_)
      split_words(w, false, SplitBehavior::Isolated, [&](std::string_view s, Ranges& out) { regex_->find_all(s, out); });
    if (map_bytes_)
      rewrite_words(w, [](std::string_view s, bool, std::string& out) { out += byte_level_encode(s); });
  }

 private:
  bool add_prefix_space_, map_bytes_;
  std::unique_ptr<Regex> regex_;
};

class MetaspacePre : public PreTokenizer {
 public:
  explicit MetaspacePre(const json& j) {
    replacement_ = j.value("replacement", "\xE2\x96\x81");
    split_ = j.value("split", true);
    std::string scheme = j.value("prepend_scheme", "");
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    if (scheme == "always") prepend_ = Prepend::Always;
    else if (scheme == "first") prepend_ = Prepend::First;
    else if (scheme == "never") prepend_ = Prepend::Never;
    else throw Error("tokenizer.json: Metaspace prepend_scheme '" + scheme + "' is unknown");
  }
  void apply(Words& w) const override {
    rewrite_words(w, [&](std::string_view s, bool at_start, std::string& out) {
      bool prepend = prepend_ == Prepend::Always || (prepend_ == Prepend::First && at_start);
      if (prepend && s.substr(0, replacement_.size()) != replacement_ && !(s.size() && s[0] == ' '))
        out += replacement_;
      for (char c : s) {
        if (c == ' ') out += replacement_;
        else out += c;
      }
    });
    if (split_)
      split_words(w, false, SplitBehavior::MergedWithNext, [&](std::string_view s, Ranges& out) {
        for (size_t p = s.find(replacement_); p != std::string_view::npos; p = s.find(replacement_, p + replacement_.size()))
          out.emplace_back(p, p + replacement_.size());
      });
  }

 private:
  enum class Prepend { Always, First, Never };
  std::string replacement_;
  bool split_;
  Prepend prepend_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void apply(Words& w) const override {
    for (auto& p : parts_) p->apply(w);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

std::unique_ptr<PreTokenizer> make_one(const json& j, bool last, bool& byte_level_output) {
  std::string type = j.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    const auto& list = j.at("pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) {
      bool blo = false;
      parts.push_back(make_one(list[i], last && i + 1 == list.size(), blo));
      byte_level_output = blo;
    }
    return std::make_unique<SequencePre>(std::move(parts));
  }
  if (type == "Split") return std::make_unique<SplitPre>(j);
  if (type == "ByteLevel") {
    // Mapping bytes to chars is left to the model when nothing after this step looks at the text.
    byte_level_output = last;
    return std::make_unique<ByteLevelPre>(j, !last);
  }
  if (type == "Metaspace") return std::make_unique<MetaspacePre>(j);
  if (type == "Whitespace")
    return std::make_unique<RegexPre>(R"(\w+|[^\w\s]+)", true, SplitBehavior::Removed, "pre_tokenizer Whitespace");
  if (type == "WhitespaceSplit") return char_split(is_whitespace, SplitBehavior::Removed);
  if (type == "Punctuation") return char_split(is_punctuation, parse_behavior(j, SplitBehavior::Isolated));
  if (type == "Digits")
    return char_split(is_numeric, j.value("individual_digits", false) ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  if (type == "CharDelimiterSplit") {
    std::string d = j.at("delimiter").get<std::string>();
    char32_t dc = 0;
    if (!d.empty()) utf8_decode(d, 0, dc);
    return char_split([dc](char32_t c) { return c == dc; }, SplitBehavior::Removed);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(char_split(is_whitespace, SplitBehavior::Removed));
    parts.push_back(char_split(is_punctuation, SplitBehavior::Isolated));
    return std::make_unique<SequencePre>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported pre_tokenizer type '" + type + "'");
}

}  // namespace

PreTokenizerChain make_pre_tokenizer(const json& j) {
  PreTokenizerChain chain;
  if (!j.is_null()) chain.pre = make_one(j, true, chain.byte_level_output);
  return chain;
}

}  // namespace tessera::tok

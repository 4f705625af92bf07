// Pre-tokenizers of tokenizer.json: split a normalized piece into words for the model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::tok {

// Words as byte ranges of one buffer. `at_start`: the word begins at offset 0 of the
// original input (Metaspace's "first" prepend scheme depends on it).
struct Words {
  struct Span {
    uint32_t begin, end;
    bool at_start;
  };
  std::string text;
  std::vector<Span> spans;
  std::string_view view(const Span& s) const { return std::string_view(text).substr(s.begin, s.end - s.begin); }
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Splits [0, len) at `matches` (sorted, non-overlapping) the way the reference's
// NormalizedString::split does; appends the kept non-empty ranges to `out`.
void split_ranges(size_t len, const std::vector<std::pair<size_t, size_t>>& matches, bool invert,
                  SplitBehavior behavior, std::vector<std::pair<size_t, size_t>>& out);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void apply(Words& words) const = 0;
};

struct PreTokenizerChain {
  std::unique_ptr<PreTokenizer> pre;
  // True when the chain ends with a ByteLevel step whose byte-to-char mapping was left to the
  // model (the words stay raw bytes and the model starts from per-byte tokens).
  bool byte_level_output = false;
};

// Builds the pre-tokenizer of a tokenizer.json "pre_tokenizer" object (null pre for JSON null).
PreTokenizerChain make_pre_tokenizer(const nlohmann::json& j);

}  // namespace tessera::tok

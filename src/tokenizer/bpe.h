// Byte-pair encoding: byte-level (GPT-2, Llama 3, Qwen, DeepSeek, o200k) and SentencePiece
// style (Metaspace "▁", byte_fallback: Llama 2, Mistral, Gemma).
#pragma once
#include <array>
#include <atomic>
#include <deque>

#include "tokenizer/model.h"

namespace tessera::tok {

struct BpeOptions {
  std::string unk_token;  // empty: none
  std::string continuing_subword_prefix, end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

// One merge as written in tokenizer.json: views into the JSON text, or into `owned` for
// strings that held escapes.
struct MergeText {
  std::string_view a, b;
};
class JsonScanner;
// Parses the "merges" array (strings "a b" or pairs ["a", "b"]) at the scanner's position.
std::vector<MergeText> parse_merges(JsonScanner& js, std::deque<std::string>& owned);

class BpeModel : public Model {
 public:
  // Fill the vocabulary first (load_vocab), then build the merge table from `merges`.
  void build(BpeOptions opt, const std::vector<MergeText>& merges, const std::string& where);
  void encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const override;

 private:
  // Initial symbols of a word: one per char (per byte for byte-level words), with unknown
  // chars going to byte-fallback tokens or <unk>.
  void initial_symbols(std::string_view word, bool byte_level, std::vector<int32_t>& syms) const;
  void encode_piece(std::string_view word, bool byte_level, std::vector<int32_t>& out) const;
  void merge(std::vector<int32_t>& syms) const;
  void merge_long(std::vector<int32_t>& syms) const;

  BpeOptions opt_;
  int32_t unk_id_ = -1;
  PairMap merges_;
  std::array<int32_t, 256> byte_ids_{};      // byte -> id of its byte-level char
  std::array<int32_t, 256> fallback_ids_{};  // byte -> id of "<0xXX>"
  std::vector<int32_t> char_ids_;            // code point -> id of the one-char token
  bool plain_symbols_ = true;                // no subword prefix/suffix: chars map straight to ids
  static constexpr char32_t kMetaspace = 0x2581;  // SentencePiece's "▁"
  std::vector<bool> joins_metaspace_;        // char -> some token holds it followed by "▁"
  bool split_at_spaces_ = false;
  uint64_t instance_ = next_instance_++;     // keys this model's per-thread word cache
  static inline std::atomic<uint64_t> next_instance_{1};
};

}  // namespace tessera::tok

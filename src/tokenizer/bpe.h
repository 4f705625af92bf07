// Byte-pair encoding: byte-level (GPT-2, Llama 3, Qwen, DeepSeek, o200k) and SentencePiece
// style (Metaspace "▁", byte_fallback: Llama 2, Mistral, Gemma).
#pragma once
#include <array>
#include <atomic>

#include "tokenizer/model.h"

namespace tessera::tok {

struct BpeOptions {
  std::string unk_token;  // empty: none
  std::string continuing_subword_prefix, end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel : public Model {
 public:
  // vocab_json: the "vocab" object; merges_json: the "merges" array (strings "a b" or pairs).
  BpeModel(std::string_view vocab_json, std::string_view merges_json, BpeOptions opt, const std::string& where);
  void encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const override;

 private:
  // Initial symbols of a word: one per char (per byte for byte-level words), with unknown
  // chars going to byte-fallback tokens or <unk>.
  void initial_symbols(std::string_view word, bool byte_level, std::vector<int32_t>& syms) const;
  void merge(std::vector<int32_t>& syms) const;
  void merge_long(std::vector<int32_t>& syms) const;

  BpeOptions opt_;
  int32_t unk_id_ = -1;
  PairMap merges_;
  std::array<int32_t, 256> byte_ids_{};      // byte -> id of its byte-level char
  std::array<int32_t, 256> fallback_ids_{};  // byte -> id of "<0xXX>"
  std::vector<int32_t> char_ids_;            // code point -> id of the one-char token
  bool plain_symbols_ = true;                // no subword prefix/suffix: chars map straight to ids
  uint64_t instance_ = next_instance_++;     // keys this model's per-thread word cache
  static inline std::atomic<uint64_t> next_instance_{1};
};

}  // namespace tessera::tok

// The model of tokenizer.json: turns one pre-tokenized word into token ids.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hash_tables.h"

namespace tessera::tok {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `word`. With `byte_level`, the word holds raw bytes that stand for
  // their GPT-2 byte-level characters (the vocabulary's alphabet).
  virtual void encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const = 0;

  // Vocabulary as written in tokenizer.json (byte-level tokens keep their "Ġ" form).
  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  // Empty view for an id the model does not have.
  std::string_view id_to_token(int32_t id) const {
    if (!has_id(id)) return {};
    return vocab_.key_at(uint32_t(tokens_[id] >> 32), uint32_t(tokens_[id]));
  }
  bool has_id(int32_t id) const { return id >= 0 && size_t(id) < tokens_.size() && tokens_[id] != kNone; }
  size_t id_limit() const { return tokens_.size(); }
  // Fills the vocabulary from a JSON object of "token": id.
  void load_vocab(std::string_view vocab_json, const std::string& where);

 protected:
  static constexpr uint64_t kNone = ~uint64_t(0);
  StringIdMap vocab_;
  std::vector<uint64_t> tokens_;  // id -> (arena offset << 32 | length) of its string in vocab_
};

class JsonScanner;

// Parses the tokenizer.json "model" object at the scanner's position. `where` names the file.
std::unique_ptr<Model> load_model(JsonScanner& js, const std::string& where);

}  // namespace tessera::tok

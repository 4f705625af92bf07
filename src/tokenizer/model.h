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
    return id >= 0 && size_t(id) < tokens_.size() ? std::string_view(tokens_[id]) : std::string_view();
  }
  bool has_id(int32_t id) const { return id >= 0 && size_t(id) < tokens_.size() && has_[id]; }
  size_t id_limit() const { return tokens_.size(); }

 protected:
  void add_token(std::string_view token, int32_t id);
  StringIdMap vocab_;
  std::vector<std::string> tokens_;
  std::vector<bool> has_;
};

// Parses the tokenizer.json "model" object (raw JSON text). `where` names the file in errors.
std::unique_ptr<Model> load_model(std::string_view model_json, const std::string& where);

}  // namespace tessera::tok

// Decoders of tokenizer.json: turn token strings back into text.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings; the final text is their concatenation. raw: the bytes
  // the tokens stand for in the middle of a text, as they are: no UTF-8 repair, and no leading
  // space removed (Strip, Metaspace's first token).
  virtual void decode_chain(std::vector<std::string>& tokens, bool raw) const = 0;
};

// Builds the decoder of a tokenizer.json "decoder" object; null for JSON null.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);

}  // namespace tessera::tok

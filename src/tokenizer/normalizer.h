// Normalizers of tokenizer.json: rewrite a text piece before pre-tokenization.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tessera::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normalizer described by a tokenizer.json "normalizer" object; null for JSON null.
// Throws tessera::Error for an unknown or malformed type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);

}  // namespace tessera::tok

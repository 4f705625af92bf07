// Post-processors of tokenizer.json: add special tokens (BOS, CLS/SEP, ...) around the ids.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Returns the final ids of a single sequence when special tokens are requested.
  virtual std::vector<int32_t> process(std::vector<int32_t> ids) const = 0;
};

// Builds the post-processor of a tokenizer.json "post_processor" object; null for JSON null.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j);

}  // namespace tessera::tok

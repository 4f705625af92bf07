// What a model directory says about its formats: the chat template and the added tokens,
// read straight from its JSON files (no tokenizer needed).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "tools/registry.h"

namespace tessera::tools {

struct ModelMarkers {
  std::string chat_template;                // "" when the model has none
  std::vector<std::string> added_tokens;    // tokenizer.json added_tokens[].content
};

// tokenizer_config.json "chat_template" (a string, or a list of {name, template}: "default"
// or else the first), else chat_template.jinja; tokenizer.json's added tokens. Throws
// tessera::Error naming the file when a JSON file is malformed or the directory holds neither.
ModelMarkers read_model_markers(const std::filesystem::path& dir);

FormatGuess infer_model_format(const std::filesystem::path& dir);

}  // namespace tessera::tools

// The TextCodec of a model directory: its tokenizer.json, and its chat template.
#pragma once
#include <filesystem>
#include <memory>

#include "server/text_codec.h"

namespace tessera::server {

// Null when the directory has no tokenizer.json (the model is then served with token ids).
// Throws tessera::Error when the tokenizer files are malformed.
std::unique_ptr<TextCodec> load_model_codec(const std::filesystem::path& dir);

}  // namespace tessera::server

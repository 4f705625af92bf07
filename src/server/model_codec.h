// The TextCodec of a model directory: its tokenizer.json, and its chat template.
#pragma once
#include <filesystem>
#include <memory>

#include "server/text_codec.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {

// `tok` must outlive the codec.
std::unique_ptr<TextCodec> make_model_codec(const Tokenizer& tok, const std::filesystem::path& model_dir);

}  // namespace tessera::server

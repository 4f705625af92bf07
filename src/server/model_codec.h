// The TextCodec of a model directory: its tokenizer, and its chat template when it has one
// (without one, /v1/chat/completions answers 400). A malformed template is an error here.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>

#include "server/text_codec.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {

// `tok` must outlive the codec. encode_prompt: a plain-text prompt with the model's special
// tokens, as the other commands encode it (encode(text, true) calls it). chat_template_file, when
// given, replaces the model's template (its special tokens stay the template's variables).
std::unique_ptr<TextCodec> make_model_codec(
    const Tokenizer& tok, const std::filesystem::path& model_dir,
    std::function<std::vector<int32_t>(const std::string&)> encode_prompt,
    const std::filesystem::path& chat_template_file = {});

}  // namespace tessera::server

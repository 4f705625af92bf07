#include "server/model_codec.h"

#include "core/error.h"

namespace tessera::server {
namespace {

class Decoder : public TextDecoder {
 public:
  explicit Decoder(const Tokenizer& tok) : dec_(tok, /*skip_special=*/true) {}
  std::string push(int32_t id) override { return dec_.push(id); }
  std::string flush() override { return dec_.flush(); }

 private:
  StreamDecoder dec_;
};

class ModelCodec : public TextCodec {
 public:
  using PromptEncoder = std::function<std::vector<int32_t>(const std::string&)>;
  ModelCodec(const Tokenizer& tok, PromptEncoder encode_prompt)
      : tok_(tok), encode_prompt_(std::move(encode_prompt)) {}

  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override {
    return add_special_tokens ? encode_prompt_(text) : tok_.encode(text, false);
  }
  std::unique_ptr<TextDecoder> decoder() const override { return std::make_unique<Decoder>(tok_); }
  std::string token_text(int32_t id) const override { return tok_.decode(std::span<const int32_t>(&id, 1)); }
  std::string render_chat(const ChatInput&) const override {
    throw Error("chat templates are not supported by this build yet; use /v1/completions");
  }

 private:
  const Tokenizer& tok_;
  PromptEncoder encode_prompt_;
};

}  // namespace

std::unique_ptr<TextCodec> make_model_codec(
    const Tokenizer& tok, const std::filesystem::path&,
    std::function<std::vector<int32_t>(const std::string&)> encode_prompt) {
  return std::make_unique<ModelCodec>(tok, std::move(encode_prompt));
}

}  // namespace tessera::server

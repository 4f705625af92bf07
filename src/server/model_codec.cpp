#include "server/model_codec.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"

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
  explicit ModelCodec(Tokenizer tok) : tok_(std::move(tok)) {}

  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override {
    return tok_.encode(text, add_special_tokens);
  }
  std::vector<int32_t> eos_ids() const override { return tok_.eos_ids(); }
  std::unique_ptr<TextDecoder> decoder() const override { return std::make_unique<Decoder>(tok_); }
  std::string token_text(int32_t id) const override { return tok_.decode(std::span<const int32_t>(&id, 1)); }
  std::string render_chat(const ChatInput&) const override {
    throw Error("chat templates are not supported by this build yet; use /v1/completions");
  }

 private:
  Tokenizer tok_;
};

}  // namespace

std::unique_ptr<TextCodec> load_model_codec(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "tokenizer.json")) return nullptr;
  return std::make_unique<ModelCodec>(Tokenizer::load(dir));
}

}  // namespace tessera::server

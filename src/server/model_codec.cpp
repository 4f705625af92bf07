#include "server/model_codec.h"

#include <fstream>
#include <mutex>
#include <optional>

#include "chat/chat_template.h"
#include "core/error.h"
#include "grammar/vocab.h"

namespace tessera::server {
namespace {

class Decoder : public TextDecoder {
 public:
  Decoder(const Tokenizer& tok, bool keep_special) : dec_(tok, /*skip_special=*/!keep_special) {}
  std::string push(int32_t id) override { return dec_.push(id); }
  std::string flush() override { return dec_.flush(); }

 private:
  StreamDecoder dec_;
};

// OpenAI content parts [{"type": "text", "text": ...}] become one string, as the templates of
// text models expect; other kinds of parts cannot be served by a text model.
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out)
    if (m.contains("content") && m["content"].is_array()) m["content"] = content_text(m["content"]);
  return out;
}

// Whether the directory names a chat template at all (a malformed one is an error when loading).
bool has_chat_template(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "chat_template.jinja") ||
      std::filesystem::exists(dir / "chat_template.json"))
    return true;
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in) return false;
  auto cfg = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return cfg.is_object() && cfg.contains("chat_template") && !cfg["chat_template"].is_null();
}

class ModelCodec : public TextCodec {
 public:
  using PromptEncoder = std::function<std::vector<int32_t>(const std::string&)>;
  ModelCodec(const Tokenizer& tok, PromptEncoder encode_prompt, std::optional<ChatTemplate> chat)
      : tok_(tok), encode_prompt_(std::move(encode_prompt)), chat_(std::move(chat)) {
    for (int32_t id = 0; id < tok_.vocab_size(); ++id)
      if (tok_.is_special(id))
        if (std::string t = token_text(id); !t.empty()) special_.push_back(std::move(t));
  }
  const std::vector<std::string>& special_texts() const override { return special_; }

  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const override {
    return add_special_tokens ? encode_prompt_(text) : tok_.encode(text, false);
  }
  std::unique_ptr<TextDecoder> decoder(bool keep_special) const override {
    return std::make_unique<Decoder>(tok_, keep_special);
  }
  std::string token_text(int32_t id) const override { return tok_.decode(std::span<const int32_t>(&id, 1)); }

  std::string render_chat(const ChatInput& in) const override {
    if (!chat_) throw Error("this model has no chat template; use /v1/completions");
    // chat_template_kwargs become template variables; the conversation itself wins over them.
    nlohmann::ordered_json ctx = in.template_kwargs;
    ctx["messages"] = normalize_messages(in.messages);
    if (!in.tools.is_null()) ctx["tools"] = in.tools;
    ctx["add_generation_prompt"] = in.add_generation_prompt;
    if (in.continue_final_message) ctx["continue_final_message"] = true;
    return chat_->render(ctx);
  }

  // Made on the first structured request (a 128k vocabulary takes a fraction of a second).
  std::shared_ptr<const grammar::Vocab> grammar_vocab() const override {
    std::call_once(vocab_once_, [&] { vocab_ = std::make_shared<const grammar::Vocab>(tok_.all_token_bytes()); });
    return vocab_;
  }

 private:
  const Tokenizer& tok_;
  PromptEncoder encode_prompt_;
  std::optional<ChatTemplate> chat_;
  std::vector<std::string> special_;
  mutable std::once_flag vocab_once_;
  mutable std::shared_ptr<const grammar::Vocab> vocab_;
};

}  // namespace

std::string content_text(const nlohmann::ordered_json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw Error("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    if (!text.empty()) text += '\n';
    text += part["text"].get_ref<const std::string&>();
  }
  return text;
}

std::unique_ptr<TextCodec> make_model_codec(
    const Tokenizer& tok, const std::filesystem::path& model_dir,
    std::function<std::vector<int32_t>(const std::string&)> encode_prompt,
    const std::filesystem::path& chat_template_file) {
  std::optional<ChatTemplate> chat;
  if (!chat_template_file.empty() || has_chat_template(model_dir))
    chat = ChatTemplate::from_model_dir(model_dir, chat_template_file);
  return std::make_unique<ModelCodec>(tok, std::move(encode_prompt), std::move(chat));
}

}  // namespace tessera::server

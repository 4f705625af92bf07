// What the server needs from a model's tokenizer and chat template, behind one small
// interface: the server never depends on how text is tokenized or templates are rendered.
// A model without a tokenizer has no codec; it is then served with token-id prompts only.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::grammar {
class Vocab;
}

namespace tessera::server {

// Incremental detokenization of one sequence's generated ids (UTF-8 safe: an incomplete
// character is held until the token that completes it).
class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  virtual std::string push(int32_t id) = 0;
  // Whatever is still held at the end of the sequence.
  virtual std::string flush() = 0;
};

// Keys keep the order the client sent them in: templates print tools and arguments as JSON.
struct ChatInput {
  nlohmann::ordered_json messages;         // OpenAI messages, as sent
  nlohmann::ordered_json tools;            // null when absent
  nlohmann::ordered_json template_kwargs;  // chat_template_kwargs, an object
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // the prompt ends inside the final message (vLLM's extension)
};

// A message's content as text: a string, or its text parts joined by newlines; null is "".
// Throws tessera::Error on a part that is not text.
std::string content_text(const nlohmann::ordered_json& content);

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const = 0;
  // keep_special: special tokens' text is kept (tool-call and reasoning markers often are).
  virtual std::unique_ptr<TextDecoder> decoder(bool keep_special = false) const = 0;
  // The texts of the special tokens (removed from parsed content).
  virtual const std::vector<std::string>& special_texts() const = 0;
  // One token's own text (logprobs report it).
  virtual std::string token_text(int32_t id) const = 0;
  // Renders the model's chat template; throws tessera::Error when the model has none or the
  // template rejects the conversation.
  virtual std::string render_chat(const ChatInput& in) const = 0;
  // Every token's bytes, for structured output (grammar/vocab.h); null when the codec cannot
  // spell its tokens as bytes.
  virtual std::shared_ptr<const grammar::Vocab> grammar_vocab() const { return nullptr; }
};

}  // namespace tessera::server

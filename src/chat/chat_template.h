// A model's chat template: loaded from its directory (or a string), parsed once, rendered with
// transformers' apply_chat_template conventions. render() is const and thread-safe.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/error.h"
#include "chat/interpreter.h"

namespace tessera {

class ChatTemplate {
 public:
  // Parses `source`; the parse is shared with every other ChatTemplate of the same source text.
  // Throws chat::TemplateError (TemplateSyntaxError with line and column) on a malformed template.
  static ChatTemplate from_string(const std::string& source);
  // A template file on its own (no special tokens); syntax errors name the file.
  static ChatTemplate from_file(const std::filesystem::path& file);

  // The template of a model directory, in transformers' order of precedence: `override_file` when
  // given, else chat_template.jinja, else chat_template.json {"chat_template": ...}, else
  // tokenizer_config.json "chat_template" (a string, or a list of {"name", "template"} where
  // "default" and "tool_use" are picked by whether tools are passed). The special tokens of
  // tokenizer_config.json (bos_token, eos_token, ...) become default variables.
  // Throws tessera::Error naming the file when none is found or a file is malformed.
  static ChatTemplate from_model_dir(const std::filesystem::path& dir, const std::filesystem::path& override_file = {});

  // Renders `context` (an object: messages, tools, add_generation_prompt, and any other key as a
  // variable, like chat_template_kwargs). As transformers does, tools and documents default to
  // None and add_generation_prompt to false. `continue_final_message` true is apply_chat_template's
  // argument, not a variable: the render ends where the final message's text does, so the model
  // continues it (tessera::Error where that text is not in the render, or with add_generation_prompt).
  // Throws chat::TemplateError with the template line and column when the template raises
  // (raise_exception, undefined values, type errors, ...).
  std::string render(const nlohmann::ordered_json& context, const chat::RenderOptions& opts = {}) const;

  // The source of the template render() would use for `context` (tool-call format detection reads it).
  const std::string& source(const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) const;
  // Names of the named templates ("default" for a single template).
  std::vector<std::string> names() const;
  const std::string& source_named(std::string_view name) const;
  // Variables every render starts from (the model's special tokens).
  const nlohmann::ordered_json& defaults() const { return defaults_; }

 private:
  struct Named {
    std::string name;
    std::shared_ptr<const chat::Program> program;
  };
  std::vector<Named> templates_;
  nlohmann::ordered_json defaults_ = nlohmann::ordered_json::object();

  const Named& select(const nlohmann::ordered_json& context) const;
};

}  // namespace tessera

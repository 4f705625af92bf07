// Format names, and which format a model uses, read from its chat template and vocabulary.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tessera::tools {

std::vector<std::string> tool_format_names();       // canonical names, sorted
std::vector<std::string> reasoning_format_names();  // canonical names, sorted

struct FormatGuess {
  std::string tool;       // "" when the template shows no tool-call format
  std::string reasoning;  // "" when the model does not reason in tags
};

// Picks formats from the markers a chat template writes and the tokens a vocabulary holds
// (tokenizer.json's added tokens suffice).
FormatGuess infer_format(std::string_view chat_template, const std::vector<std::string>& vocab_tokens);

// Whether a rendered prompt leaves a reasoning block open, so that the output starts inside it
// (e.g. a generation prompt ending in "<think>\n").
bool prompt_opens_reasoning(std::string_view prompt, std::string_view reasoning_format);

}  // namespace tessera::tools

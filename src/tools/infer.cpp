// Which formats a model uses, from the markers its chat template and vocabulary hold.
#include <algorithm>

#include "tools/formats.h"
#include "tools/registry.h"

namespace tessera::tools {
namespace {

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

}  // namespace

FormatGuess infer_format(std::string_view tmpl, const std::vector<std::string>& vocab) {
  auto has = [&](std::string_view marker) {
    return contains(tmpl, marker) || std::find(vocab.begin(), vocab.end(), marker) != vocab.end();
  };
  FormatGuess guess;
  if (has("<|channel|>") && has("<|message|>")) return {"harmony", "harmony"};
  // Most specific markers first: several formats also write <tool_call>.
  static const std::pair<const char*, const char*> kToolMarkers[] = {
      {"<|tool_call>", "gemma4"},
      {"<start_function_call>", "function_gemma"},
      {"<minimax:tool_call>", "minimax_m2"},
      {"<|tool_calls_section_begin|>", "kimi_k2"},
      {"<longcat_tool_call>", "longcat"},
      {"<arg_key>", "glm47"},
      {"<parameter=", "qwen3_coder"},
      {"<｜tool▁calls▁begin｜>", "deepseek_v3"},
      {"[TOOL_CALLS]", "mistral"},
      {"<|tool_call_start|>", "pythonic"},
      {"<|tool_list_start|>", "pythonic"},
      {"<tool_call>", "hermes"},
      {"<|python_tag|>", "llama3_json"},
  };
  for (const auto& [marker, name] : kToolMarkers) {
    if (contains(tmpl, marker)) {
      guess.tool = name;
      break;
    }
  }
  // A vocabulary lists markers of formats its template may not use; only the less ambiguous count.
  if (guess.tool.empty()) {
    for (const auto& [marker, name] : kToolMarkers) {
      if (std::string_view(marker) == "<parameter=" || std::string_view(marker) == "<arg_key>") continue;
      if (std::find(vocab.begin(), vocab.end(), marker) != vocab.end()) {
        guess.tool = name;
        break;
      }
    }
  }
  // Llama 3.2 writes bare JSON calls without announcing them by a tag.
  if (guess.tool.empty() && contains(tmpl, "ipython") && contains(tmpl, "\"parameters\"")) guess.tool = "llama3_json";
  if (has("<|channel>") && guess.tool == "gemma4") guess.reasoning = "gemma4";
  else if (has("[THINK]")) guess.reasoning = "mistral";
  else if (has("<think>") || has("</think>")) guess.reasoning = guess.tool == "kimi_k2" ? "kimi_k2" : "think";
  return guess;
}

bool prompt_opens_reasoning(std::string_view prompt, std::string_view reasoning_format) {
  const ThinkTags* tags = find_think_tags(reasoning_format);
  if (!tags) return false;
  size_t open = std::string_view::npos;
  for (const auto& tag : tags->open) {
    size_t p = prompt.rfind(tag);
    if (p != std::string_view::npos && (open == std::string_view::npos || p > open)) open = p;
  }
  if (open == std::string_view::npos) return false;
  for (const auto& tag : tags->close)
    if (prompt.find(tag, open) != std::string_view::npos) return false;
  return true;
}

}  // namespace tessera::tools

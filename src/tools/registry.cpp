#include "tools/registry.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "tools/formats.h"
#include "tools/parser.h"

namespace tessera::tools {
namespace {

using FormatFactory = std::unique_ptr<BlockFormat> (*)();

const std::map<std::string, FormatFactory, std::less<>>& block_formats() {
  static const std::map<std::string, FormatFactory, std::less<>> formats = {
      {"hermes", make_hermes_format},         {"qwen3_coder", make_qwen3_coder_format},
      {"gemma4", make_gemma4_format},         {"function_gemma", make_function_gemma_format},
      {"minimax_m2", make_minimax_m2_format}, {"kimi_k2", make_kimi_k2_format},
      {"glm47", make_glm47_format},           {"longcat", make_longcat_format},
      {"llama3_json", make_llama3_json_format}, {"mistral", make_mistral_format},
      {"deepseek_v3", make_deepseek_v3_format}, {"pythonic", make_pythonic_format},
  };
  return formats;
}

// Other names the same formats go by (mlx-lm's and vLLM's).
std::string_view canonical_tool(std::string_view name) {
  static const std::map<std::string, std::string, std::less<>> aliases = {
      {"json_tools", "hermes"}, {"qwen", "hermes"},        {"qwen3", "hermes"},       {"glm45", "glm47"},
      {"glm4_moe", "glm47"},    {"deepseek_v31", "deepseek_v3"}, {"gpt-oss", "harmony"}, {"openai", "harmony"},
      {"llama4_pythonic", "pythonic"}, {"lfm2", "pythonic"},
  };
  auto it = aliases.find(name);
  return it == aliases.end() ? name : std::string_view(it->second);
}

const std::map<std::string, ThinkTags, std::less<>>& think_formats() {
  static const std::map<std::string, ThinkTags, std::less<>> formats = {
      {"think", {{"<think>"}, {"</think>"}}},
      {"gemma4", {{"<|channel>thought\n", "<|channel>thought"}, {"<channel|>"}}},
      {"mistral", {{"[THINK]"}, {"[/THINK]"}}},
      {"kimi_k2", {{"<think>"}, {"</think>"}, {"<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"}}},
  };
  return formats;
}

std::string_view canonical_reasoning(std::string_view name) {
  static const std::map<std::string, std::string, std::less<>> aliases = {
      {"qwen3", "think"}, {"deepseek_r1", "think"}, {"glm45", "think"},    {"glm47", "think"},
      {"minimax_m2", "think"}, {"gpt-oss", "harmony"}, {"openai", "harmony"},
  };
  auto it = aliases.find(name);
  return it == aliases.end() ? name : std::string_view(it->second);
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

const ThinkTags* find_think_tags(std::string_view reasoning_format) {
  auto it = think_formats().find(canonical_reasoning(reasoning_format));
  return it == think_formats().end() ? nullptr : &it->second;
}

std::unique_ptr<StreamParser> make_parser(const ParserOptions& options) {
  std::string_view tool = canonical_tool(options.tool_format);
  std::string_view reasoning = canonical_reasoning(options.reasoning_format);
  bool parse_tools = options.tool_choice.mode != ToolChoiceMode::None;
  if (tool == "harmony" || reasoning == "harmony") {
    bool harmony_tools = parse_tools && (tool == "harmony" || tool.empty());
    TESSERA_CHECK(tool.empty() || tool == "harmony",
                  "tool format '" + options.tool_format + "' cannot be combined with harmony reasoning");
    return make_composed_parser(make_harmony_parser(options, harmony_tools), nullptr, options);
  }
  std::unique_ptr<StreamParser> reasoning_parser;
  if (!reasoning.empty()) {
    auto it = think_formats().find(reasoning);
    TESSERA_CHECK(it != think_formats().end(), "unknown reasoning parser '" + options.reasoning_format +
                                                   "' (known: " + join(reasoning_format_names()) + ")");
    reasoning_parser = make_think_parser(it->second, options.starts_in_reasoning);
  }
  std::unique_ptr<StreamParser> tool_parser;
  if (options.forced_calls) {
    tool_parser = make_forced_call_parser(options);
  } else if (!tool.empty()) {
    auto it = block_formats().find(tool);
    TESSERA_CHECK(it != block_formats().end(),
                  "unknown tool parser '" + options.tool_format + "' (known: " + join(tool_format_names()) + ")");
    if (parse_tools) tool_parser = make_block_parser(it->second(), options);
  }
  return make_composed_parser(std::move(reasoning_parser), std::move(tool_parser), options);
}

bool calls_can_be_forced(std::string_view tool_format, std::string_view reasoning_format) {
  return canonical_tool(tool_format) != "harmony" && canonical_reasoning(reasoning_format) != "harmony";
}

Message parse_text(std::string_view text, const ParserOptions& options, bool truncated) {
  auto parser = make_parser(options);
  MessageBuilder builder;
  builder.add(parser->feed(text));
  builder.add(parser->finish(truncated));
  return builder.result();
}

std::vector<std::string> tool_format_names() {
  std::vector<std::string> names{"harmony"};
  for (const auto& [name, factory] : block_formats()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> reasoning_format_names() {
  std::vector<std::string> names{"harmony"};
  for (const auto& [name, tags] : think_formats()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tessera::tools

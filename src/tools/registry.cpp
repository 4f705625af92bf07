#include "tools/registry.h"

#include <algorithm>
#include <functional>
#include <map>

#include "core/error.h"
#include "tools/formats.h"
#include "tools/log.h"
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

struct ThinkTags {
  std::vector<std::string> open, close;
};

const std::map<std::string, ThinkTags, std::less<>>& think_formats() {
  static const std::map<std::string, ThinkTags, std::less<>> formats = {
      {"think", {{"<think>"}, {"</think>"}}},
      {"gemma4", {{"<|channel>thought\n", "<|channel>thought"}, {"<channel|>"}}},
      {"mistral", {{"[THINK]"}, {"[/THINK]"}}},
  };
  return formats;
}

std::string_view canonical_reasoning(std::string_view name) {
  static const std::map<std::string, std::string, std::less<>> aliases = {
      {"qwen3", "think"}, {"deepseek_r1", "think"}, {"glm45", "think"},    {"glm47", "think"},
      {"minimax_m2", "think"}, {"kimi_k2", "think"}, {"gpt-oss", "harmony"}, {"openai", "harmony"},
  };
  auto it = aliases.find(name);
  return it == aliases.end() ? name : std::string_view(it->second);
}

// Applies tool_choice and parallel_tool_calls to the call events, renumbering what is kept.
class CallFilter {
 public:
  CallFilter(const ToolChoice& choice, bool parallel) : choice_(choice), parallel_(parallel) {}

  void apply(std::vector<ToolCallDelta>& events) {
    std::vector<ToolCallDelta> kept;
    for (auto& event : events) {
      if (!event.name.empty()) {
        bool keep = true;
        if (choice_.mode == ToolChoiceMode::Named && event.name != choice_.name) {
          warn("tool call to '" + event.name + "' dropped: tool_choice names '" + choice_.name + "'");
          keep = false;
        } else if (!parallel_ && kept_count_ > 0) {
          warn("tool call to '" + event.name + "' dropped: parallel_tool_calls is false");
          keep = false;
        }
        current_ = keep ? kept_count_++ : -1;
      }
      if (current_ < 0) continue;
      event.index = current_;
      kept.push_back(std::move(event));
    }
    events = std::move(kept);
  }

  void finish() const {
    if (kept_count_ == 0 && (choice_.mode == ToolChoiceMode::Required || choice_.mode == ToolChoiceMode::Named))
      warn("tool_choice asked for a call but the output holds none");
  }

 private:
  ToolChoice choice_;
  bool parallel_;
  int kept_count_ = 0;
  int current_ = -1;
};

// Reasoning first, then tool calls in what remains content.
class ComposedParser : public StreamParser {
 public:
  ComposedParser(std::unique_ptr<StreamParser> reasoning, std::unique_ptr<StreamParser> tools, CallFilter filter)
      : reasoning_(std::move(reasoning)), tools_(std::move(tools)), filter_(std::move(filter)) {}

  Delta feed(std::string_view piece) override {
    Delta out = reasoning_ ? reasoning_->feed(piece) : Delta{std::string(piece), {}, {}};
    return route(std::move(out), false, false);
  }

  Delta finish(bool truncated) override {
    Delta out = reasoning_ ? reasoning_->finish(truncated) : Delta{};
    out = route(std::move(out), true, truncated);
    filter_.finish();
    return out;
  }

 private:
  Delta route(Delta in, bool at_end, bool truncated) {
    if (!tools_) return in;
    Delta out = tools_->feed(in.content);
    out.reasoning = std::move(in.reasoning);
    for (auto& call : in.tool_calls) out.tool_calls.push_back(std::move(call));
    if (at_end) out.append(tools_->finish(truncated));
    filter_.apply(out.tool_calls);
    return out;
  }

  std::unique_ptr<StreamParser> reasoning_;
  std::unique_ptr<StreamParser> tools_;
  CallFilter filter_;
};

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

}  // namespace

ToolChoice ToolChoice::from_json(const nlohmann::json& value) {
  if (value.is_null()) return {};
  if (value.is_string()) {
    auto s = value.get<std::string>();
    if (s == "auto") return {};
    if (s == "none") return {ToolChoiceMode::None, ""};
    if (s == "required") return {ToolChoiceMode::Required, ""};
    throw Error("tool_choice: expected \"auto\", \"none\", \"required\" or a function, got \"" + s + "\"");
  }
  if (value.is_object() && value.contains("function") && value["function"].is_object() &&
      value["function"].contains("name") && value["function"]["name"].is_string())
    return {ToolChoiceMode::Named, value["function"]["name"].get<std::string>()};
  throw Error("tool_choice: expected a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
}

std::unique_ptr<StreamParser> make_parser(const ParserOptions& options) {
  std::string_view tool = canonical_tool(options.tool_format);
  std::string_view reasoning = canonical_reasoning(options.reasoning_format);
  bool parse_tools = options.tool_choice.mode != ToolChoiceMode::None;
  CallFilter filter(options.tool_choice, options.parallel_tool_calls);
  if (tool == "harmony" || reasoning == "harmony") {
    bool harmony_tools = parse_tools && (tool == "harmony" || tool.empty());
    TESSERA_CHECK(tool.empty() || tool == "harmony",
                  "tool format '" + options.tool_format + "' cannot be combined with harmony reasoning");
    return std::make_unique<ComposedParser>(make_harmony_parser(options, harmony_tools), nullptr, filter);
  }
  std::unique_ptr<StreamParser> reasoning_parser;
  if (!reasoning.empty()) {
    auto it = think_formats().find(reasoning);
    TESSERA_CHECK(it != think_formats().end(), "unknown reasoning parser '" + options.reasoning_format + "'");
    reasoning_parser = make_think_parser(it->second.open, it->second.close, options.starts_in_reasoning);
  }
  std::unique_ptr<StreamParser> tool_parser;
  if (!tool.empty()) {
    auto it = block_formats().find(tool);
    TESSERA_CHECK(it != block_formats().end(), "unknown tool parser '" + options.tool_format + "'");
    if (parse_tools) tool_parser = make_block_parser(it->second(), options);
  }
  return std::make_unique<ComposedParser>(std::move(reasoning_parser), std::move(tool_parser), filter);
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
  else if (has("<think>") || has("</think>")) guess.reasoning = "think";
  return guess;
}

bool prompt_opens_reasoning(std::string_view prompt, std::string_view reasoning_format) {
  std::string_view reasoning = canonical_reasoning(reasoning_format);
  auto it = think_formats().find(reasoning);
  if (it == think_formats().end()) return false;
  size_t open = std::string_view::npos;
  for (const auto& tag : it->second.open) {
    size_t p = prompt.rfind(tag);
    if (p != std::string_view::npos && (open == std::string_view::npos || p > open)) open = p;
  }
  if (open == std::string_view::npos) return false;
  for (const auto& tag : it->second.close)
    if (prompt.find(tag, open) != std::string_view::npos) return false;
  return true;
}

}  // namespace tessera::tools

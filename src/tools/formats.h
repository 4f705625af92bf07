// The formats, one file each; the registry (registry.cpp) maps their names to these.
// Internal to the tools library.
#pragma once
#include <memory>

#include "tools/block.h"

namespace tessera::tools {

std::unique_ptr<BlockFormat> make_hermes_format();
std::unique_ptr<BlockFormat> make_qwen3_coder_format();
std::unique_ptr<BlockFormat> make_gemma4_format();
std::unique_ptr<BlockFormat> make_function_gemma_format();
std::unique_ptr<BlockFormat> make_minimax_m2_format();
std::unique_ptr<BlockFormat> make_kimi_k2_format();
std::unique_ptr<BlockFormat> make_glm47_format();
std::unique_ptr<BlockFormat> make_longcat_format();
std::unique_ptr<BlockFormat> make_llama3_json_format();
std::unique_ptr<BlockFormat> make_mistral_format();
std::unique_ptr<BlockFormat> make_deepseek_v3_format();
std::unique_ptr<BlockFormat> make_pythonic_format();

// gpt-oss harmony carries reasoning and calls in one grammar, so one parser does both.
std::unique_ptr<StreamParser> make_harmony_parser(const ParserOptions& options, bool parse_tools);

// Reasoning tags of a reasoning format (after aliases); nullptr for harmony or an unknown name.
struct ThinkTags {
  std::vector<std::string> open, close;
  // Markers that end reasoning without a close tag and belong to the content (Kimi K2 may
  // open its tool-call section while still reasoning).
  std::vector<std::string> implicit_close = {};
};
const ThinkTags* find_think_tags(std::string_view reasoning_format);

// Reasoning between tags (<think>…</think>, Gemma 4's <|channel>thought…<channel|>).
std::unique_ptr<StreamParser> make_think_parser(const ThinkTags& tags, bool starts_in_reasoning);

// The calls as forced_calls_schema's JSON (ParserOptions::forced_calls).
std::unique_ptr<StreamParser> make_forced_call_parser(const ParserOptions& options);

// Runs `reasoning` (may be null) first and `tools` (may be null) on the content it leaves,
// applying options.tool_choice and parallel_tool_calls to the calls.
std::unique_ptr<StreamParser> make_composed_parser(std::unique_ptr<StreamParser> reasoning,
                                                   std::unique_ptr<StreamParser> tools, const ParserOptions& options);

}  // namespace tessera::tools

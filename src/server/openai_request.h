// Parsing and validating the bodies of /v1/chat/completions and /v1/completions. Every wrong
// type or out-of-range value is an ApiError(400) naming the field; nothing here needs the model
// except the vocabulary size, checked later by the server.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "server/text_codec.h"
#include "tools/parser.h"

namespace tessera::server {

enum class Endpoint { Chat, Completion };

// One prompt of /v1/completions: token ids, or text to tokenize.
struct PromptInput {
  std::vector<int32_t> ids;
  std::string text;
  bool is_text = false;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completion;
  std::string model;                 // empty: the served model
  std::vector<PromptInput> prompts;  // completions: one or more
  ChatInput chat;                    // chat: the conversation to render
  SamplingParams params;             // logprobs < 0: none
  std::optional<int> max_tokens;     // none: up to the context length; 0 only with echo
  // Extension (vLLM): no EOS, stop id or stop string before this many; at most what max_tokens
  // (or the context) allows, checked with the prompt.
  int min_tokens = 0;
  // Completions: the prompt's text as sent (and, with logprobs, its tokens' logprobs) before each
  // choice's completion, as OpenAI's legacy API gives them for scoring. Chat (vLLM's): the final
  // message's text before the content, where that message is the answer's own role.
  bool echo = false;
  // vLLM's: each prompt cut to its last k tokens; -1: to the context length.
  std::optional<int64_t> truncate_prompt_tokens;
  int n = 1;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;  // extension (vLLM): finish on these ids too
  bool ignore_eos = false;              // extension (vLLM)
  bool include_stop_str_in_output = false;  // extension (vLLM): a stop string found ends the text
  bool skip_special_tokens = true;          // extension (vLLM): false keeps special tokens' text
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats (vLLM's): usage in every chunk
  bool return_token_ids = false;  // extension (vLLM): prompt and generated ids in the response
  tools::ToolChoice tool_choice;  // auto unless sent
  bool parallel_tool_calls = true;
  // Structured output (response_format json_object / json_schema; vLLM's structured_outputs,
  // guided_json, guided_choice, guided_regex, guided_grammar; llama.cpp's grammar): the JSON
  // Schema the output is held to, keys in the order sent (the order properties are written in),
  // the texts it must be one of, a regular expression it must match, or a GBNF grammar. None:
  // free text.
  nlohmann::ordered_json json_schema;
  std::vector<std::string> choices;
  std::string regex, gbnf;
  std::string output_param;  // the field that asked for it (its errors name it)
  // Chat: tool_choice "required" or a named function held by a grammar (tools::forced_calls_schema),
  // set by the server once it knows the model's formats.
  bool forced_calls = false;
};

// `defaults` are the model's sampling defaults; fields the request sets override them.
// `raw`: the body as sent, parsed again with its key order kept (for the chat template and a
// response_format's schema).
GenerationRequest parse_chat_request(const nlohmann::json& body, const SamplingParams& defaults,
                                     const std::string& raw = "");
GenerationRequest parse_completion_request(const nlohmann::json& body, const SamplingParams& defaults,
                                           const std::string& raw = "");

// POST /tokenize (vLLM's): a prompt's text, or a chat's messages rendered as
// /v1/chat/completions renders them.
struct TokenizeRequest {
  std::string model;
  bool chat = false;
  std::string prompt;  // without chat
  ChatInput messages;  // with chat
  bool add_special_tokens = true;  // unset: for a prompt, not for messages (the template writes BOS)
  bool return_token_strs = false;
};
TokenizeRequest parse_tokenize_request(const nlohmann::json& body, const std::string& raw = "");

// POST /detokenize (vLLM's): token ids to text.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
DetokenizeRequest parse_detokenize_request(const nlohmann::json& body);

}  // namespace tessera::server

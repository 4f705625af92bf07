#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_request.h"

using namespace tessera;
using namespace tessera::server;
using nlohmann::json;

namespace {

// The param an invalid body is rejected for (400), or "" when it is accepted.
std::string rejected_param(const json& body, Endpoint e = Endpoint::Completion) {
  try {
    if (e == Endpoint::Chat)
      parse_chat_request(body, {});
    else
      parse_completion_request(body, {});
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), 400) << err.what();
    return err.param().empty() ? "<none>" : err.param();
  }
  return "";
}

TEST(OpenAiRequest, CompletionFieldsOverrideTheModelDefaults) {
  SamplingParams defaults;
  defaults.temperature = 0.6f;
  defaults.top_k = 20;
  auto r =
      parse_completion_request(json::parse(R"({"prompt": [1, 2, 3], "top_p": 0.5, "max_tokens": 7, "n": 2,
      "seed": 9, "stop": "x", "logprobs": 2, "logit_bias": {"5": -100}, "stop_token_ids": [4]})"),
                               defaults);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.6f);
  EXPECT_EQ(r.params.top_k, 20);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.seed, 9u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.logprobs, 2);
  ASSERT_EQ(r.params.logit_bias.size(), 1u);
  EXPECT_EQ(r.params.logit_bias[0].first, 5);
  EXPECT_EQ(r.stop_token_ids, std::vector<int32_t>{4});
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.prompts[0].is_text);
}

TEST(OpenAiRequest, PromptShapes) {
  auto r = parse_completion_request(json::parse(R"({"prompt": ["a", [4, 5], "b"]})"), {});
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_TRUE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[1].ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(r.prompts[2].text, "b");
  EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt": "hi"})"), {}).prompts[0].text, "hi");
}

TEST(OpenAiRequest, NullMeansUnset) {
  auto r = parse_completion_request(
      json::parse(R"({"prompt": [1], "temperature": null, "max_tokens": null})"), {});
  EXPECT_FLOAT_EQ(r.params.temperature, 1.0f);
  EXPECT_FALSE(r.max_tokens);
}

TEST(OpenAiRequest, MaxCompletionTokensWinsOverMaxTokens) {
  auto r = parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
      "max_tokens": 5, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3,
      "chat_template_kwargs": {"enable_thinking": false}, "stream": true, "stream_options": {"include_usage": true}})"),
                              {});
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.chat.template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.chat.add_generation_prompt);
}

// vLLM's: continuing the final message drops the generation prompt, and refuses one asked for.
TEST(OpenAiRequest, ContinueFinalMessageAndChatEcho) {
  json body =
      json::parse(R"({"messages": [{"role": "assistant", "content": "x"}], "continue_final_message": true,
      "echo": true})");
  auto r = parse_chat_request(body, {});
  EXPECT_TRUE(r.chat.continue_final_message);
  EXPECT_FALSE(r.chat.add_generation_prompt);
  EXPECT_TRUE(r.echo);
  body["add_generation_prompt"] = false;
  EXPECT_EQ(rejected_param(body, Endpoint::Chat), "");
  body["add_generation_prompt"] = true;
  EXPECT_EQ(rejected_param(body, Endpoint::Chat), "continue_final_message");
  body["continue_final_message"] = false;
  EXPECT_EQ(rejected_param(body, Endpoint::Chat), "");
  body["continue_final_message"] = "yes";
  EXPECT_EQ(rejected_param(body, Endpoint::Chat), "continue_final_message");
}

// OpenAI's reasoning_effort becomes a template variable unless chat_template_kwargs sets one;
// vLLM's truncate_prompt_tokens keeps the last k tokens (-1: the context).
TEST(OpenAiRequest, ReasoningEffortAndTruncatePromptTokens) {
  json body = json::parse(R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "high"})");
  EXPECT_EQ(parse_chat_request(body, {}).chat.template_kwargs["reasoning_effort"], "high");
  body["chat_template_kwargs"] = {{"reasoning_effort", "low"}};
  EXPECT_EQ(parse_chat_request(body, {}).chat.template_kwargs["reasoning_effort"], "low");
  body["reasoning_effort"] = 3;
  EXPECT_EQ(rejected_param(body, Endpoint::Chat), "reasoning_effort");

  json text = {{"prompt", "x"}};
  EXPECT_FALSE(parse_completion_request(text, {}).truncate_prompt_tokens);
  text["truncate_prompt_tokens"] = 5;
  EXPECT_EQ(parse_completion_request(text, {}).truncate_prompt_tokens, 5);
  text["truncate_prompt_tokens"] = -1;
  EXPECT_EQ(parse_completion_request(text, {}).truncate_prompt_tokens, -1);
  for (json bad : {json(0), json(-2), json("5"), json(1.5)}) {
    text["truncate_prompt_tokens"] = bad;
    EXPECT_EQ(rejected_param(text), "truncate_prompt_tokens") << bad;
  }
}

TEST(OpenAiRequest, ChatKeepsTheClientsKeyOrderForTheTemplate) {
  std::string raw = R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"zeta": 1, "alpha": 2}}}]})";
  auto r = parse_chat_request(json::parse(raw), {}, raw);
  EXPECT_EQ(r.chat.tools[0]["function"]["parameters"].dump(), R"({"zeta":1,"alpha":2})");
  EXPECT_EQ(r.chat.messages[0].dump(), R"({"role":"user","content":"x"})");
  EXPECT_TRUE(r.chat.template_kwargs.is_object());
}

TEST(OpenAiRequest, WrongTypesAndRangesNameTheField) {
  json ok = {{"prompt", {1, 2}}};
  auto with = [&](const char* k, json v) {
    json b = ok;
    b[k] = std::move(v);
    return b;
  };
  EXPECT_EQ(rejected_param(ok), "");
  EXPECT_EQ(rejected_param(json::array()), "<none>");
  EXPECT_EQ(rejected_param(json::object()), "prompt");
  EXPECT_EQ(rejected_param(with("temperature", "1")), "temperature");
  EXPECT_EQ(rejected_param(with("temperature", 2.5)), "temperature");
  EXPECT_EQ(rejected_param(with("top_p", 0)), "top_p");
  EXPECT_EQ(rejected_param(with("max_tokens", 0)), "max_tokens");
  EXPECT_EQ(rejected_param(with("max_tokens", 1.5)), "max_tokens");
  EXPECT_EQ(rejected_param(with("max_tokens", 1e30)), "max_tokens");
  EXPECT_EQ(rejected_param(with("n", 0)), "n");
  EXPECT_EQ(rejected_param(with("stop", json::array({1}))), "stop");
  EXPECT_EQ(rejected_param(with("logit_bias", {{"x", 1}})), "logit_bias");
  EXPECT_EQ(rejected_param(with("logit_bias", {{"3", "1"}})), "logit_bias");
  EXPECT_EQ(rejected_param(with("prompt", json::array())), "prompt");
  EXPECT_EQ(rejected_param(with("prompt", {1, "a"})), "prompt");
  EXPECT_EQ(rejected_param(with("prompt", {-1})), "prompt");
  EXPECT_EQ(rejected_param(with("prompt", {1.5})), "prompt");
  EXPECT_EQ(rejected_param(with("stream_options", {{"include_usage", true}})), "stream_options");
  EXPECT_EQ(rejected_param(with("response_format", {{"type", "json_schema"}})), "response_format");
  EXPECT_EQ(rejected_param(with("response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}})),
            "response_format");
  EXPECT_EQ(rejected_param(with("response_format", {{"type", "json_object"}, {"schema", "x"}})), "response_format");
  EXPECT_EQ(rejected_param(with("response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "integer"}}}}}})), "");
  EXPECT_EQ(rejected_param(with("response_format", {{"type", "json_object"}})), "");
  EXPECT_EQ(rejected_param(with("response_format", {{"type", "text"}})), "");
  EXPECT_EQ(rejected_param(with("echo", true)), "");
  EXPECT_EQ(rejected_param(with("echo", 1)), "echo");
  json echo_only = with("echo", true);
  echo_only["max_tokens"] = 0;  // the prompt alone, scored: allowed only with echo
  EXPECT_EQ(rejected_param(echo_only), "");
  echo_only["max_tokens"] = -1;
  EXPECT_EQ(rejected_param(echo_only), "max_tokens");
  EXPECT_EQ(rejected_param({{"messages", "hi"}}, Endpoint::Chat), "messages");
  EXPECT_EQ(rejected_param({{"messages", {{{"content", "x"}}}}}, Endpoint::Chat), "messages");
  EXPECT_EQ(rejected_param({{"messages", {{{"role", "user"}, {"content", 5}}}}}, Endpoint::Chat), "messages");
  EXPECT_EQ(rejected_param({{"messages", {{{"role", "user"}}}}, {"top_logprobs", 2}}, Endpoint::Chat),
            "top_logprobs");
}

TEST(OpenAiRequest, ToolChoiceAndParallelToolCalls) {
  json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  auto r = parse_chat_request({{"messages", msgs}}, {});
  EXPECT_EQ(r.tool_choice.mode, tools::ToolChoiceMode::Auto);
  EXPECT_TRUE(r.parallel_tool_calls);
  json named = {{"type", "function"}, {"function", {{"name", "f"}}}};
  r = parse_chat_request({{"messages", msgs}, {"tool_choice", named}, {"parallel_tool_calls", false}}, {});
  EXPECT_EQ(r.tool_choice.mode, tools::ToolChoiceMode::Named);
  EXPECT_EQ(r.tool_choice.name, "f");
  EXPECT_FALSE(r.parallel_tool_calls);
  for (const char* mode : {"auto", "none", "required"})
    EXPECT_EQ(rejected_param({{"messages", msgs}, {"tool_choice", mode}}, Endpoint::Chat), "");
  for (json bad : {json("sometimes"), json(3), json{{"type", "function"}}, json{{"function", {{"name", 1}}}}})
    EXPECT_EQ(rejected_param({{"messages", msgs}, {"tool_choice", bad}}, Endpoint::Chat), "tool_choice")
        << bad;
  EXPECT_EQ(rejected_param({{"messages", msgs}, {"parallel_tool_calls", "yes"}}, Endpoint::Chat),
            "parallel_tool_calls");
}

TEST(OpenAiRequest, ErrorBodyHasOpenAisShape) {
  json e = ApiError(404, "no such model", "model").to_json();
  EXPECT_EQ(e["error"]["message"], "no such model");
  EXPECT_EQ(e["error"]["type"], "not_found_error");
  EXPECT_EQ(e["error"]["param"], "model");
  EXPECT_EQ(e["error"]["code"], 404);
}

}  // namespace

// Structured output's four spellings, each giving a schema (keys in the order sent) or choices,
// and the field its errors name; two of them in one request are refused.
TEST(OpenAiRequest, StructuredOutputFormsAndTheirErrors) {
  auto parse = [](const std::string& extra) {
    const std::string raw = R"({"prompt": [1, 2], )" + extra + "}";
    return parse_completion_request(json::parse(raw), {}, raw);
  };
  auto r = parse(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
                    "schema": {"type": "object", "properties": {"z": {}, "a": {}}}}})");
  EXPECT_EQ(r.output_param, "response_format");
  EXPECT_EQ(r.json_schema["properties"].begin().key(), "z");  // the order sent
  r = parse(R"("guided_json": "{\"type\": \"integer\"}")");
  EXPECT_EQ(r.output_param, "guided_json");
  EXPECT_EQ(r.json_schema, nlohmann::ordered_json::parse(R"({"type": "integer"})"));
  r = parse(R"("guided_choice": ["yes", "no"])");
  EXPECT_EQ(r.output_param, "guided_choice");
  EXPECT_EQ(r.choices, (std::vector<std::string>{"yes", "no"}));
  r = parse(R"("structured_outputs": {"choice": ["a"], "disable_any_whitespace": true})");
  EXPECT_EQ(r.choices, std::vector<std::string>{"a"});
  r = parse(R"("structured_outputs": {"json_object": true})");
  EXPECT_EQ(r.json_schema, nlohmann::ordered_json::parse(R"({"type": "object"})"));
  r = parse(R"("response_format": {"type": "text"})");
  EXPECT_TRUE(r.output_param.empty());

  json ok = {{"prompt", {1, 2}}};
  auto with = [&](const char* k, json v) {
    json b = ok;
    b[k] = std::move(v);
    return b;
  };
  EXPECT_EQ(rejected_param(with("guided_json", "{not json")), "guided_json");
  EXPECT_EQ(rejected_param(with("guided_json", 3)), "guided_json");
  EXPECT_EQ(rejected_param(with("guided_choice", json::array())), "guided_choice");
  EXPECT_EQ(rejected_param(with("guided_choice", {"a", 1})), "guided_choice");
  EXPECT_EQ(rejected_param(with("structured_outputs", {{"structural_tag", "x"}})), "structured_outputs");
  EXPECT_EQ(rejected_param(with("guided_regex", 5)), "guided_regex");
  EXPECT_EQ(parse(R"("guided_regex": "[0-9]+")").regex, "[0-9]+");
  EXPECT_EQ(parse(R"("structured_outputs": {"regex": "a|b"})").regex, "a|b");
  EXPECT_EQ(rejected_param(with("grammar", json::array())), "grammar");
  EXPECT_EQ(rejected_param(with("guided_grammar", "")), "guided_grammar");
  EXPECT_EQ(parse(R"("grammar": "root ::= \"a\"")").gbnf, "root ::= \"a\"");
  EXPECT_EQ(parse(R"("structured_outputs": {"grammar": "root ::= [0-9]+"})").output_param, "structured_outputs");
  EXPECT_EQ(rejected_param(with("structured_outputs", "json")), "structured_outputs");
  json both = with("guided_choice", {"a"});
  both["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(rejected_param(both), "guided_choice");  // the second kind named
}

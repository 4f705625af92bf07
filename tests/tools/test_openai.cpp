// Parser output in OpenAI's shapes: streamed chunks that a client folds into the message.
#include <gtest/gtest.h>

#include "stream_check.h"
#include "tools/openai.h"
#include "tools/parser.h"

namespace tessera::tools {
namespace {

using nlohmann::ordered_json;

// What an OpenAI client does with the chunks' deltas.
ordered_json fold(const std::vector<ordered_json>& deltas) {
  ordered_json message = {{"role", "assistant"}, {"content", ""}};
  ordered_json calls = ordered_json::array();
  std::string reasoning;
  for (const auto& d : deltas) {
    if (d.contains("content")) message["content"] = message["content"].get<std::string>() + d["content"].get<std::string>();
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    for (const auto& c : d.value("tool_calls", ordered_json::array())) {
      size_t index = c["index"];
      if (index == calls.size()) {
        EXPECT_TRUE(c.contains("id") && c["type"] == "function" && c["function"].contains("name")) << c;
        calls.push_back({{"id", c["id"]}, {"type", "function"}, {"function", {{"name", c["function"]["name"]}, {"arguments", ""}}}});
      }
      auto& args = calls.at(index)["function"]["arguments"];
      args = args.get<std::string>() + c["function"]["arguments"].get<std::string>();
    }
  }
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!calls.empty()) {
    if (message["content"] == "") message["content"] = nullptr;
    message["tool_calls"] = calls;
  }
  return message;
}

TEST(OpenAiShapes, StreamedChunksFoldIntoTheMessage) {
  ParserOptions options;
  options.tool_format = "hermes";
  options.reasoning_format = "think";
  options.call_id_prefix = "call_req7_";
  std::string text = "<think>Plan.</think>On it.<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": \"é\"}}</tool_call>"
                     "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
  Message whole = parse_text(text, options);
  auto parser = make_parser(options);
  std::vector<ordered_json> deltas;
  for (char c : text) {
    Delta d = parser->feed(std::string(1, c));
    if (!d.empty()) deltas.push_back(to_openai_delta(d));
  }
  deltas.push_back(to_openai_delta(parser->finish(false)));
  ordered_json expected = to_openai_message(whole);
  EXPECT_EQ(fold(deltas), expected);
  EXPECT_EQ(expected["tool_calls"][1]["id"], "call_req7_1");
  EXPECT_EQ(expected["tool_calls"][0]["function"]["arguments"], "{\"x\":\"é\"}");
  EXPECT_STREQ(finish_reason(whole, false), "tool_calls");
  EXPECT_STREQ(finish_reason(whole, true), "length");
  EXPECT_STREQ(finish_reason(Message{}, false), "stop");
}

TEST(OpenAiShapes, MessageWithoutCalls) {
  Message m{"Hi", std::nullopt, {}};
  EXPECT_EQ(to_openai_message(m), ordered_json::parse(R"({"role": "assistant", "content": "Hi"})"));
  EXPECT_TRUE(to_openai_delta(Delta{}).empty());
}

}  // namespace
}  // namespace tessera::tools

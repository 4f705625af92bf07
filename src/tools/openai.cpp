#include "tools/openai.h"

namespace tessera::tools {
namespace {

nlohmann::ordered_json call_json(int index, const std::string& id, const std::string& name, const std::string& args) {
  nlohmann::ordered_json call;
  if (index >= 0) call["index"] = index;
  if (!id.empty()) call["id"] = id;
  nlohmann::ordered_json function;
  if (!name.empty()) {
    call["type"] = "function";
    function["name"] = name;
  }
  function["arguments"] = args;
  call["function"] = std::move(function);
  return call;
}

}  // namespace

nlohmann::ordered_json to_openai_delta(const Delta& delta) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!delta.content.empty()) out["content"] = delta.content;
  if (!delta.reasoning.empty()) out["reasoning_content"] = delta.reasoning;
  if (!delta.tool_calls.empty()) {
    auto& calls = out["tool_calls"] = nlohmann::ordered_json::array();
    for (const auto& event : delta.tool_calls) calls.push_back(call_json(event.index, event.id, event.name, event.arguments));
  }
  return out;
}

nlohmann::ordered_json to_openai_message(const Message& message) {
  nlohmann::ordered_json out;
  out["role"] = "assistant";
  bool only_calls = message.content.empty() && !message.tool_calls.empty();
  out["content"] = only_calls ? nlohmann::ordered_json() : nlohmann::ordered_json(message.content);
  if (message.reasoning) out["reasoning_content"] = *message.reasoning;
  if (!message.tool_calls.empty()) {
    auto& calls = out["tool_calls"] = nlohmann::ordered_json::array();
    for (const auto& call : message.tool_calls) calls.push_back(call_json(-1, call.id, call.name, call.arguments));
  }
  return out;
}

const char* finish_reason(const Message& message, bool truncated) {
  if (truncated) return "length";
  return message.tool_calls.empty() ? "stop" : "tool_calls";
}

}  // namespace tessera::tools

// What a parser produces: content, reasoning and tool calls, as streaming deltas and as a whole.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace tessera::tools {

// One step of a tool call in OpenAI's streaming shape: the first event of a call carries its
// index, id and name (arguments empty); later events carry only argument fragments.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct Delta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  void append(Delta&& other);
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI's function.arguments
};

// A whole response: what the concatenated deltas add up to.
struct Message {
  std::string content;
  std::optional<std::string> reasoning;  // absent when the model gave none
  std::vector<ToolCall> tool_calls;
};

// Folds streamed deltas into the whole message.
class MessageBuilder {
 public:
  void add(const Delta& delta);
  Message result() const;

 private:
  Message message_;
};

}  // namespace tessera::tools

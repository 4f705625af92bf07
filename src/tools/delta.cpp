#include "delta.h"

#include "core/error.h"

namespace tessera::tools {

void Delta::append(Delta&& other) {
  content += other.content;
  reasoning += other.reasoning;
  for (auto& call : other.tool_calls) tool_calls.push_back(std::move(call));
}

void MessageBuilder::add(const Delta& delta) {
  message_.content += delta.content;
  if (!delta.reasoning.empty()) {
    if (!message_.reasoning) message_.reasoning.emplace();
    *message_.reasoning += delta.reasoning;
  }
  for (const auto& event : delta.tool_calls) {
    auto& calls = message_.tool_calls;
    if (event.index == static_cast<int>(calls.size())) {
      TESSERA_CHECK(!event.name.empty(), "tool call delta " + std::to_string(event.index) + " starts without a name");
      calls.push_back({event.id, event.name, ""});
    }
    TESSERA_CHECK(event.index >= 0 && event.index < static_cast<int>(calls.size()),
                  "tool call delta index " + std::to_string(event.index) + " out of order");
    calls[event.index].arguments += event.arguments;
  }
}

Message MessageBuilder::result() const { return message_; }

}  // namespace tessera::tools

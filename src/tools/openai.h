// Parser output in the shapes of OpenAI's chat completions API.
#pragma once
#include <nlohmann/json.hpp>

#include "tools/delta.h"

namespace tessera::tools {

// choices[i].delta of a streamed chunk: "content", "reasoning_content" and "tool_calls" where
// present. A call's first entry carries index, id, type and function.name (arguments ""),
// later entries index and function.arguments only.
nlohmann::ordered_json to_openai_delta(const Delta& delta);

// choices[i].message of a whole response; content is null when the response is only calls.
nlohmann::ordered_json to_openai_message(const Message& message);

// "length" when max_tokens cut the output (even if calls were parsed before the cut), else
// "tool_calls" when there are calls, else "stop".
const char* finish_reason(const Message& message, bool truncated);

}  // namespace tessera::tools

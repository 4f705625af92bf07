// Building OpenAI response bodies and SSE chunks from choice deltas. A chat message is built in
// one place (chat_message), from the raw text or, with a parser, from its deltas.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/openai_request.h"

namespace tessera::server {

struct ResponseContext {
  Endpoint endpoint = Endpoint::Completion;
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  const TextCodec* codec = nullptr;  // null: tokens are shown as "token_id:N"
  bool logprobs = false;
  bool return_token_ids = false;
  std::vector<std::vector<int32_t>> prompt_ids;  // per prompt, for return_token_ids
  bool parsed = false;  // chat choices carry parser output (content, reasoning, tool calls)
};

nlohmann::json usage_json(const Usage& u);
// The whole response: `choices` are the accumulated deltas, in index order.
nlohmann::json full_response(const ResponseContext& ctx, const std::vector<ChoiceDelta>& choices,
                             const Usage& u);
// A response's streamed chunks differ only in their choice: the rest of the SSE event is
// rendered once per response.
struct ChunkFrame {
  std::string head;  // "data: {\"choices\":["
  std::string tail;  // "],\"created\":...}\n\n"
};
ChunkFrame chunk_frame(const ResponseContext& ctx);
// Appends one streamed chunk's SSE event. `first` marks a chat choice's first chunk (it
// carries the role); `usage`, when given, is the request's so far (continuous_usage_stats).
void append_chunk_event(std::string& out, const ChunkFrame& frame, const ResponseContext& ctx,
                        const ChoiceDelta& d, bool first, const Usage* usage = nullptr);
// The final chunk with usage and no choices (stream_options.include_usage).
nlohmann::json usage_chunk(const ResponseContext& ctx, const Usage& u);
// "data: <json>\n\n"
std::string sse_event(const nlohmann::json& j);

}  // namespace tessera::server

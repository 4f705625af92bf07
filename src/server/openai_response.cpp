#include "server/openai_response.h"

#include "tools/openai.h"

namespace tessera::server {
namespace {

using nlohmann::json;

std::string token_text(const ResponseContext& ctx, int32_t id) {
  return ctx.codec ? ctx.codec->token_text(id) : "token_id:" + std::to_string(id);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(int(ch));
  return b;
}

json chat_logprobs(const ResponseContext& ctx, const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const auto& lp : lps) {
    std::string t = token_text(ctx, lp.id);
    json top = json::array();
    for (auto [id, v] : lp.top) {
      std::string tt = token_text(ctx, id);
      top.push_back({{"token", tt}, {"logprob", v}, {"bytes", bytes_of(tt)}});
    }
    content.push_back({{"token", t}, {"logprob", lp.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const ResponseContext& ctx, const std::vector<TokenLogprob>& lps) {
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& lp : lps) {
    tokens.push_back(token_text(ctx, lp.id));
    values.push_back(lp.has_logprob ? json(lp.logprob) : json(nullptr));
    json top = json::object();
    for (auto [id, v] : lp.top) top[token_text(ctx, id)] = v;
    tops.push_back(lp.has_logprob ? top : json(nullptr));
    offsets.push_back(lp.text_offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json logprobs_json(const ResponseContext& ctx, const ChoiceDelta& d) {
  if (!ctx.logprobs) return nullptr;
  return ctx.endpoint == Endpoint::Chat ? chat_logprobs(ctx, d.logprobs)
                                        : completion_logprobs(ctx, d.logprobs);
}

json finish_json(const ChoiceDelta& d) {
  return d.finish_reason.empty() ? json(nullptr) : json(d.finish_reason);
}

// The assistant message of a chat choice: the parser's deltas folded, or the plain text.
json chat_message(const ResponseContext& ctx, const ChoiceDelta& c) {
  if (!ctx.parsed) return {{"role", "assistant"}, {"content", c.text}};
  tools::MessageBuilder b;
  b.add(c.parsed);
  json m = {{"role", "assistant"}};
  nlohmann::ordered_json parsed = tools::to_openai_message(b.result());
  for (auto& [k, v] : parsed.items()) m[k] = v;
  return m;
}

json envelope(const ResponseContext& ctx, const char* object) {
  return {{"id", ctx.id}, {"object", object}, {"created", ctx.created}, {"model", ctx.model}};
}

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json full_response(const ResponseContext& ctx, const std::vector<ChoiceDelta>& choices, const Usage& u) {
  bool chat = ctx.endpoint == Endpoint::Chat;
  json out = envelope(ctx, chat ? "chat.completion" : "text_completion");
  json arr = json::array();
  for (const auto& c : choices) {
    json j = {{"index", c.index}, {"logprobs", logprobs_json(ctx, c)}, {"finish_reason", finish_json(c)}};
    if (chat)
      j["message"] = chat_message(ctx, c);
    else
      j["text"] = c.text;
    if (ctx.return_token_ids) j["token_ids"] = c.token_ids;
    arr.push_back(std::move(j));
  }
  out["choices"] = std::move(arr);
  out["usage"] = usage_json(u);
  if (ctx.return_token_ids) out["prompt_token_ids"] = ctx.prompt_ids;
  return out;
}

ChunkFrame chunk_frame(const ResponseContext& ctx) {
  json out = envelope(ctx, ctx.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  std::string s = out.dump(-1, ' ', false, json::error_handler_t::replace);
  size_t at = s.find("[]");  // keys are sorted: "choices" comes first
  return {"data: " + s.substr(0, at + 1), s.substr(at + 1) + "\n\n"};
}

void append_chunk_event(std::string& out, const ChunkFrame& frame, const ResponseContext& ctx,
                        const ChoiceDelta& d, bool first, const Usage* usage) {
  json c = {{"index", d.index}, {"logprobs", logprobs_json(ctx, d)}, {"finish_reason", finish_json(d)}};
  if (ctx.endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (ctx.parsed) {
      nlohmann::ordered_json parsed = tools::to_openai_delta(d.parsed);
      for (auto& [k, v] : parsed.items()) delta[k] = v;
    } else if (!d.text.empty() || first)
      delta["content"] = d.text;
    c["delta"] = std::move(delta);
  } else {
    c["text"] = d.text;
  }
  if (ctx.return_token_ids) c["token_ids"] = d.token_ids;
  out += frame.head;
  out += c.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!usage) {
    out += frame.tail;
    return;
  }
  out.append(frame.tail, 0, frame.tail.size() - 3);  // without "}\n\n": usage is the last key
  out += ",\"usage\":" + usage_json(*usage).dump() + "}\n\n";
}

json usage_chunk(const ResponseContext& ctx, const Usage& u) {
  json out = envelope(ctx, ctx.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(u);
  return out;
}

// Token texts may end inside a UTF-8 character: invalid bytes are replaced (the exact
// bytes are in "bytes").
std::string sse_event(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace tessera::server

// POST /tokenize and /detokenize, as vLLM serves them: the served model's tokenizer and chat
// template, with no generation. A chat's messages render as /v1/chat/completions renders them,
// so the count is what that request's usage.prompt_tokens will be.
#include "core/error.h"
#include "server/server_state.h"

namespace tessera::server {
namespace {

using nlohmann::json;

const TextCodec& codec_of(const Server::State& st, const std::string& model) {
  check_served_model(st, model);
  if (!st.codec) throw ApiError(400, "this model has no tokenizer");
  return *st.codec;
}

}  // namespace

void handle_tokenize(const Server::State& st, const httplib::Request& req, httplib::Response& res) {
  try {
    TokenizeRequest r = parse_tokenize_request(request_json(req.body), req.body);
    const TextCodec& codec = codec_of(st, r.model);
    std::vector<int32_t> ids;
    try {
      ids = codec.encode(r.chat ? codec.render_chat(r.messages) : r.prompt, r.add_special_tokens);
    } catch (const Error& e) {
      throw ApiError(400, e.what(), r.chat ? "messages" : "prompt");
    }
    json strs = nullptr;
    if (r.return_token_strs) {
      strs = json::array();
      for (int32_t id : ids) strs.push_back(codec.token_text(id));
    }
    set_json(res, {{"count", ids.size()}, {"max_model_len", st.info.max_model_len}, {"tokens", ids},
                   {"token_strs", strs}});
  } catch (const ApiError& e) {
    set_error(res, e);
  }
}

void handle_detokenize(const Server::State& st, const httplib::Request& req, httplib::Response& res) {
  try {
    DetokenizeRequest r = parse_detokenize_request(request_json(req.body));
    const TextCodec& codec = codec_of(st, r.model);
    std::string text;
    std::unique_ptr<TextDecoder> decoder = codec.decoder(/*keep_special=*/true);
    for (int32_t id : r.tokens) {
      check_token(st, id, "tokens");
      text += decoder->push(id);
    }
    set_json(res, {{"prompt", text + decoder->flush()}});
  } catch (const ApiError& e) {
    set_error(res, e);
  }
}

}  // namespace tessera::server

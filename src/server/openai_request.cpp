#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "server/api_error.h"

namespace tessera::server {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw ApiError(400, "'" + field + "' " + what, field);
}

// A present, non-null field (OpenAI clients send null for "unset").
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const json& body, const char* key, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(key, "must be a number");
  double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    bad(key, "must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + v->dump());
  return x;
}

std::optional<int64_t> integer(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (d != std::floor(d)) bad(key, "must be an integer");
    if (!(d >= double(lo) && d <= double(hi)))
      bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return int64_t(d);
  }
  if (!v->is_number_integer()) bad(key, "must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                 std::to_string(x));
  return x;
}

std::optional<bool> boolean(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, "must be a boolean");
  return v->get<bool>();
}

int32_t token_id(const json& v, const std::string& key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
      v.get<int64_t>() > std::numeric_limits<int32_t>::max())
    bad(key, "must hold token ids (non-negative integers)");
  return v.get<int32_t>();
}

std::vector<int32_t> token_ids(const json& arr, const std::string& key) {
  std::vector<int32_t> ids;
  for (const json& t : arr) ids.push_back(token_id(t, key));
  return ids;
}

PromptInput text_prompt(std::string text) {
  PromptInput p;
  p.text = std::move(text);
  p.is_text = true;
  return p;
}

PromptInput ids_prompt(std::vector<int32_t> ids) {
  PromptInput p;
  p.ids = std::move(ids);
  return p;
}

std::string model_name(const json& body) {
  const json* v = field(body, "model");
  if (v && !v->is_string()) bad("model", "must be a string");
  return v ? v->get<std::string>() : std::string();
}

// The conversation of a chat request, keys in the order sent (`raw`: the body as sent, or empty).
ChatInput chat_input(const json& body, const std::string& raw) {
  const json* msgs = field(body, "messages");
  if (!msgs) bad("messages", "is required");
  if (!msgs->is_array() || msgs->empty()) bad("messages", "must be a non-empty array");
  for (const json& m : *msgs) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad("messages", "must be objects with a string 'role'");
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string() &&
        !m["content"].is_array())
      bad("messages", "content must be a string, an array of parts or null");
  }
  if (const json* t = field(body, "tools"); t && !t->is_array()) bad("tools", "must be an array");
  if (const json* k = field(body, "chat_template_kwargs"); k && !k->is_object())
    bad("chat_template_kwargs", "must be an object");
  auto ordered =
      raw.empty() ? nlohmann::ordered_json::parse(body.dump()) : nlohmann::ordered_json::parse(raw);
  ChatInput c;
  c.messages = ordered["messages"];
  if (field(body, "tools")) c.tools = ordered["tools"];
  c.template_kwargs = field(body, "chat_template_kwargs") ? ordered["chat_template_kwargs"]
                                                          : nlohmann::ordered_json::object();
  // OpenAI's reasoning_effort reaches templates that read it (gpt-oss's "Reasoning: high") as a
  // variable; one in chat_template_kwargs wins.
  if (const json* e = field(body, "reasoning_effort")) {
    if (!e->is_string()) bad("reasoning_effort", "must be a string such as \"low\", \"medium\" or \"high\"");
    if (!c.template_kwargs.contains("reasoning_effort"))
      c.template_kwargs["reasoning_effort"] = e->get<std::string>();
  }
  // vLLM's: continuing the final message implies no generation prompt, and refuses one asked for.
  c.continue_final_message = boolean(body, "continue_final_message").value_or(false);
  std::optional<bool> generation_prompt = boolean(body, "add_generation_prompt");
  if (c.continue_final_message && generation_prompt.value_or(false))
    throw ApiError(400, "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                   "continue_final_message");
  c.add_generation_prompt = generation_prompt.value_or(!c.continue_final_message);
  return c;
}

// Structured output: at most one of response_format (json_object / json_schema), vLLM's
// structured_outputs (json, choice, regex, grammar, json_object) and its older guided_json /
// guided_choice / guided_regex / guided_grammar, and llama.cpp's grammar (GBNF). Schemas are taken with their
// keys in the order sent (`raw`).
void parse_output_format(const json& body, const std::string& raw, GenerationRequest& r) {
  auto ordered = [&](const char* key) {
    return (raw.empty() ? nlohmann::ordered_json::parse(body.dump()) : nlohmann::ordered_json::parse(raw))[key];
  };
  std::vector<std::string> asked;
  // vLLM takes a schema as an object or as its JSON text.
  auto schema = [&](const nlohmann::ordered_json& v, const char* param) {
    nlohmann::ordered_json s = v;
    if (v.is_string()) s = nlohmann::ordered_json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!s.is_object() && !s.is_boolean()) bad(param, "must be a JSON Schema (an object, or its JSON text)");
    r.json_schema = std::move(s);
    asked.push_back(param);
  };
  auto text = [&](const json& v, const char* param, const char* what, std::string& out) {
    if (!v.is_string() || v.get<std::string>().empty()) bad(param, std::string("must be ") + what);
    out = v.get<std::string>();
    asked.push_back(param);
  };
  auto gbnf = [&](const json& v, const char* param) { text(v, param, "a grammar (GBNF text)", r.gbnf); };
  auto regex = [&](const json& v, const char* param) { text(v, param, "a regular expression", r.regex); };
  auto choices = [&](const json& v, const char* param) {
    if (!v.is_array() || v.empty()) bad(param, "must be a non-empty array of strings");
    for (const json& c : v) {
      if (!c.is_string()) bad(param, "must be a non-empty array of strings");
      r.choices.push_back(c.get<std::string>());
    }
    asked.push_back(param);
  };

  if (const json* v = field(body, "response_format")) {
    if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string())
      bad("response_format", "must be an object with a string 'type'");
    const std::string type = (*v)["type"];
    if (type == "json_object") {
      // A schema beside it (llama.cpp's form) narrows the object; without one, any object.
      if (v->contains("schema") && !(*v)["schema"].is_object()) bad("response_format", "schema must be an object");
      schema(v->contains("schema") ? ordered("response_format")["schema"] : nlohmann::ordered_json{{"type", "object"}},
             "response_format");
    } else if (type == "json_schema") {
      const json* js = v->contains("json_schema") ? &(*v)["json_schema"] : nullptr;
      if (!js || !js->is_object() || !js->contains("schema") || !((*js)["schema"].is_object() || (*js)["schema"].is_boolean()))
        bad("response_format", "json_schema must be an object with a 'schema'");
      schema(ordered("response_format")["json_schema"]["schema"], "response_format");
    } else if (type != "text") {
      bad("response_format", "type must be 'text', 'json_object' or 'json_schema'");
    }
  }
  if (field(body, "guided_json")) schema(ordered("guided_json"), "guided_json");
  if (const json* v = field(body, "guided_choice")) choices(*v, "guided_choice");
  if (const json* v = field(body, "guided_grammar")) gbnf(*v, "guided_grammar");
  if (const json* v = field(body, "guided_regex")) regex(*v, "guided_regex");
  if (const json* v = field(body, "grammar")) gbnf(*v, "grammar");
  if (const json* v = field(body, "structured_outputs")) {
    if (!v->is_object()) bad("structured_outputs", "must be an object");
    for (const auto& [key, value] : v->items()) {
      if (key == "json") schema(ordered("structured_outputs")["json"], "structured_outputs");
      else if (key == "choice") choices(value, "structured_outputs");
      else if (key == "grammar") gbnf(value, "structured_outputs");
      else if (key == "regex") regex(value, "structured_outputs");
      else if (key == "json_object" && value == true) schema(nlohmann::ordered_json{{"type", "object"}}, "structured_outputs");
      else if (key == "json_object" || key.rfind("disable_", 0) == 0) continue;  // false, and the back end's hints
      else bad("structured_outputs", "'" + key + "' is not supported (json, choice, regex, grammar and json_object are)");
    }
  }
  if (asked.size() > 1)
    bad(asked[1], "asks for structured output as " + asked[0] + " does: a request takes one kind of it");
  if (!asked.empty()) r.output_param = asked[0];
}

// Fields both endpoints share. least_max_tokens: the least max_tokens accepted (0 only for a
// completion that echoes its prompt).
void parse_common(const json& body, GenerationRequest& r, const std::string& raw, int least_max_tokens = 1) {
  r.model = model_name(body);
  SamplingParams& p = r.params;
  if (auto x = number(body, "temperature", 0, 2)) p.temperature = float(*x);
  if (auto x = number(body, "top_p", 0, 1)) {
    if (*x <= 0) bad("top_p", "must be greater than 0");
    p.top_p = float(*x);
  }
  if (auto x = integer(body, "top_k", -1, std::numeric_limits<int32_t>::max())) p.top_k = int(*x);
  if (auto x = number(body, "min_p", 0, 1)) p.min_p = float(*x);
  if (auto x = number(body, "presence_penalty", -2, 2)) p.presence_penalty = float(*x);
  if (auto x = number(body, "frequency_penalty", -2, 2)) p.frequency_penalty = float(*x);
  if (auto x = number(body, "repetition_penalty", 0, 100)) {
    if (*x <= 0) bad("repetition_penalty", "must be greater than 0");
    p.repetition_penalty = float(*x);
  }
  if (const json* v = field(body, "logit_bias")) {
    if (!v->is_object()) bad("logit_bias", "must be an object mapping token ids to biases");
    for (auto& [k, b] : v->items()) {
      size_t used = 0;
      long id = -1;
      try {
        id = std::stol(k, &used);
      } catch (const std::exception&) {
      }
      if (used != k.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
        bad("logit_bias", "keys must be token ids, got \"" + k + "\"");
      if (!b.is_number() || !(b.get<double>() >= -100 && b.get<double>() <= 100))
        bad("logit_bias", "values must be numbers between -100 and 100");
      p.logit_bias.emplace_back(int32_t(id), b.get<float>());
    }
  }

  auto mt = integer(body, "max_completion_tokens", least_max_tokens, std::numeric_limits<int32_t>::max());
  if (!mt) mt = integer(body, "max_tokens", least_max_tokens, std::numeric_limits<int32_t>::max());
  if (mt) r.max_tokens = int(*mt);
  r.min_tokens = int(integer(body, "min_tokens", 0, std::numeric_limits<int32_t>::max()).value_or(0));
  r.n = int(integer(body, "n", 1, 128).value_or(1));
  if (auto s =
          integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    r.seed = uint64_t(*s);

  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const json& s : *v) {
        if (!s.is_string()) bad("stop", "must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      bad("stop", "must be a string or an array of strings");
    }
    for (const auto& s : r.stop)
      if (s.empty()) bad("stop", "must not contain empty strings");
  }
  if (const json* v = field(body, "stop_token_ids")) {
    if (!v->is_array()) bad("stop_token_ids", "must be an array of token ids");
    r.stop_token_ids = token_ids(*v, "stop_token_ids");
  }
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  r.include_stop_str_in_output = boolean(body, "include_stop_str_in_output").value_or(false);
  r.skip_special_tokens = boolean(body, "skip_special_tokens").value_or(true);
  r.return_token_ids = boolean(body, "return_token_ids").value_or(false);
  r.truncate_prompt_tokens = integer(body, "truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max());
  if (r.truncate_prompt_tokens == 0) bad("truncate_prompt_tokens", "must be -1 or at least 1");

  r.stream = boolean(body, "stream").value_or(false);
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) bad("stream_options", "must be an object");
    if (!r.stream) bad("stream_options", "is only allowed when 'stream' is true");
    r.include_usage = boolean(*v, "include_usage").value_or(false);
    r.continuous_usage = boolean(*v, "continuous_usage_stats").value_or(false);
  }

  parse_output_format(body, raw, r);
  if (auto b = integer(body, "best_of", 1, 128); b && *b != r.n)
    throw ApiError(400, "'best_of' other than n is not supported", "best_of");
}

}  // namespace

GenerationRequest parse_chat_request(const json& body, const SamplingParams& defaults,
                                     const std::string& raw) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  r.params = defaults;
  r.params.logprobs = -1;
  parse_common(body, r, raw);

  r.chat = chat_input(body, raw);
  r.echo = boolean(body, "echo").value_or(false);
  if (const json* c = field(body, "tool_choice")) {
    try {
      r.tool_choice = tools::ToolChoice::from_json(*c);
    } catch (const Error&) {
      bad("tool_choice", "must be \"auto\", \"none\", \"required\" or a named function");
    }
  }
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls").value_or(true);

  bool logprobs = boolean(body, "logprobs").value_or(false);
  auto top = integer(body, "top_logprobs", 0, 20);
  if (top && !logprobs) bad("top_logprobs", "requires 'logprobs' to be true");
  if (logprobs) r.params.logprobs = int(top.value_or(0));
  return r;
}

GenerationRequest parse_completion_request(const json& body, const SamplingParams& defaults, const std::string& raw) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  GenerationRequest r;
  r.endpoint = Endpoint::Completion;
  r.params = defaults;
  r.params.logprobs = -1;
  r.echo = boolean(body, "echo").value_or(false);
  parse_common(body, r, raw, r.echo ? 0 : 1);

  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "is required");
  const char* shape =
      "must be a string, an array of strings, an array of token ids or an array of such arrays";
  if (p->is_string()) {
    r.prompts.push_back(text_prompt(p->get<std::string>()));
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    r.prompts.push_back(ids_prompt(token_ids(*p, "prompt")));
  } else if (p->is_array() && !p->empty()) {
    for (const json& e : *p) {
      if (e.is_string())
        r.prompts.push_back(text_prompt(e.get<std::string>()));
      else if (e.is_array() && !e.empty())
        r.prompts.push_back(ids_prompt(token_ids(e, "prompt")));
      else
        bad("prompt", shape);
    }
  } else {
    bad("prompt", shape);
  }
  if (auto lp = integer(body, "logprobs", 0, 20)) r.params.logprobs = int(*lp);
  if (field(body, "suffix")) throw ApiError(400, "'suffix' is not supported", "suffix");
  return r;
}

TokenizeRequest parse_tokenize_request(const json& body, const std::string& raw) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  TokenizeRequest r;
  r.model = model_name(body);
  r.chat = field(body, "messages") != nullptr;
  if (r.chat) {
    r.messages = chat_input(body, raw);
  } else {
    const json* p = field(body, "prompt");
    if (!p || !p->is_string()) bad("prompt", "is required: a string (or send 'messages')");
    r.prompt = p->get<std::string>();
  }
  r.add_special_tokens = boolean(body, "add_special_tokens").value_or(!r.chat);
  r.return_token_strs = boolean(body, "return_token_strs").value_or(false);
  return r;
}

DetokenizeRequest parse_detokenize_request(const json& body) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  DetokenizeRequest r;
  r.model = model_name(body);
  const json* t = field(body, "tokens");
  if (!t || !t->is_array()) bad("tokens", "is required: an array of token ids");
  r.tokens = token_ids(*t, "tokens");
  return r;
}

}  // namespace tessera::server

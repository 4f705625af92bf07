#include "chat/chat_template.h"

#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "chat/parser.h"
#include "chat/text.h"
#include "core/error.h"

namespace tessera {
namespace {

// Parsed templates by source text, shared while any ChatTemplate holds them (transformers keeps
// an lru_cache of compiled templates for the same reason: a model's template is parsed once).
std::shared_ptr<const chat::Program> parse_cached(const std::string& source) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::weak_ptr<const chat::Program>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(source); it != cache.end())
      if (auto p = it->second.lock()) return p;
  }
  auto program = chat::parse(source);
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = cache.begin(); it != cache.end();) it = it->second.expired() ? cache.erase(it) : std::next(it);
  cache[source] = program;
  return program;
}

// transformers' continue_final_message: the render is cut where the final message's text ends,
// found as its last occurrence with surrounding whitespace stripped; the whitespace after it is
// kept only when the template kept it.
std::string cut_after_final_message(const std::string& rendered, const nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty() || !messages.back().is_object())
    throw Error("continue_final_message is set but there is no final message to continue");
  const nlohmann::ordered_json& content = messages.back().value("content", nlohmann::ordered_json());
  std::string final_text;
  bool found = content.is_string();
  if (found) final_text = content.get<std::string>();
  if (content.is_array())  // the last text part
    for (auto it = content.rbegin(); it != content.rend() && !found; ++it)
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string())
        final_text = (*it)["text"].get<std::string>(), found = true;
  if (!found) throw Error("continue_final_message is set but the final message has no text to continue");
  const std::string stripped = chat::text::strip(final_text, std::nullopt, true, true);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos)
    throw Error(
        "continue_final_message is set but the final message does not appear in the rendered chat "
        "(the chat template changes or drops part of it)");
  const std::string lstripped = chat::text::strip(final_text, std::nullopt, true, false);
  const bool kept = rendered.compare(at, lstripped.size(), final_text) == 0;
  return rendered.substr(0, at + (kept ? lstripped.size() : stripped.size()));
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot read " + p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const std::filesystem::path& p) {
  try {
    return nlohmann::ordered_json::parse(read_text(p));
  } catch (const nlohmann::json::exception& e) {
    throw Error(p.string() + ": invalid JSON: " + e.what());
  }
}

}  // namespace

ChatTemplate ChatTemplate::from_string(const std::string& source) {
  ChatTemplate t;
  t.templates_.push_back({"default", parse_cached(source)});
  return t;
}

ChatTemplate ChatTemplate::from_file(const std::filesystem::path& file) {
  std::string source = read_text(file);
  try {
    return from_string(source);
  } catch (const chat::TemplateError& e) {
    throw chat::TemplateError(e.type(), file.string() + ": " + e.message(), e.line(), e.column());
  }
}

ChatTemplate ChatTemplate::from_model_dir(const std::filesystem::path& dir, const std::filesystem::path& override_file) {
  ChatTemplate t;
  auto config_path = dir / "tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (std::filesystem::exists(config_path)) config = read_json(config_path);
  if (!config.is_object()) throw Error(config_path.string() + ": expected a JSON object");

  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    const auto& v = config[key];
    if (v.is_string())
      t.defaults_[key] = v;
    else if (v.is_object() && v.contains("content") && v["content"].is_string())
      t.defaults_[key] = v["content"];
  }

  auto add = [&](std::string name, const std::string& source, const std::filesystem::path& from) {
    try {
      t.templates_.push_back({std::move(name), parse_cached(source)});
    } catch (const chat::TemplateError& e) {
      throw chat::TemplateError(e.type(), from.string() + ": " + e.message(), e.line(), e.column());
    }
  };
  auto jinja = dir / "chat_template.jinja";
  auto json = dir / "chat_template.json";
  if (!override_file.empty()) {
    add("default", read_text(override_file), override_file);
  } else if (std::filesystem::exists(jinja)) {
    add("default", read_text(jinja), jinja);
  } else if (std::filesystem::exists(json)) {
    auto j = read_json(json);
    if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
      throw Error(json.string() + ": expected {\"chat_template\": \"...\"}");
    add("default", j["chat_template"].get<std::string>(), json);
  } else if (config.contains("chat_template")) {
    const auto& ct = config["chat_template"];
    if (ct.is_string()) {
      add("default", ct.get<std::string>(), config_path);
    } else if (ct.is_array()) {
      for (const auto& item : ct) {
        if (!item.is_object() || !item.contains("name") || !item.contains("template") || !item["name"].is_string() ||
            !item["template"].is_string())
          throw Error(config_path.string() + ": chat_template list entries need string \"name\" and \"template\"");
        add(item["name"].get<std::string>(), item["template"].get<std::string>(), config_path);
      }
    } else {
      throw Error(config_path.string() + ": chat_template must be a string or a list of named templates");
    }
  }
  if (t.templates_.empty())
    throw Error("no chat template in " + dir.string() +
                " (looked for chat_template.jinja, chat_template.json and tokenizer_config.json \"chat_template\")");
  return t;
}

const ChatTemplate::Named& ChatTemplate::select(const nlohmann::ordered_json& context) const {
  if (templates_.size() == 1) return templates_[0];
  auto find = [&](std::string_view name) -> const Named* {
    for (auto& n : templates_)
      if (n.name == name) return &n;
    return nullptr;
  };
  bool has_tools = context.is_object() && context.contains("tools") && !context["tools"].is_null();
  if (has_tools)
    if (auto* n = find("tool_use")) return *n;
  if (auto* n = find("default")) return *n;
  throw Error("the model has several chat templates and none is named \"default\"");
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const chat::RenderOptions& opts) const {
  if (!context.is_object()) throw Error("chat template context must be a JSON object");
  // An argument of apply_chat_template, not a template variable.
  auto flag = [&](const char* key) {
    auto it = context.find(key);
    if (it == context.end() || it->is_null()) return false;
    if (!it->is_boolean()) throw Error(std::string(key) + " must be true or false");
    return it->get<bool>();
  };
  const bool continue_final = flag("continue_final_message");
  if (continue_final && flag("add_generation_prompt"))
    throw Error(
        "continue_final_message and add_generation_prompt cannot both be true: one continues the final "
        "message, the other opens a new one");
  const Named& t = select(context);
  chat::Value vars = chat::Value::new_dict();
  auto& d = *vars.dict;
  // transformers passes these explicitly, so templates always see them defined.
  d.set(chat::Value::string("tools"), chat::Value::none());
  d.set(chat::Value::string("documents"), chat::Value::none());
  d.set(chat::Value::string("add_generation_prompt"), chat::Value::boolean(false));
  for (auto& [k, v] : defaults_.items()) d.set(chat::Value::string(k), chat::from_json(v));
  for (auto& [k, v] : context.items())
    if (k != "continue_final_message") d.set(chat::Value::string(k), chat::from_json(v));
  chat::Interpreter interp(opts);
  std::string out = interp.render(*t.program, vars);
  return continue_final ? cut_after_final_message(out, context.value("messages", nlohmann::ordered_json()))
                        : out;
}

const std::string& ChatTemplate::source(const nlohmann::ordered_json& context) const {
  return select(context).program->source;
}

std::vector<std::string> ChatTemplate::names() const {
  std::vector<std::string> out;
  for (auto& n : templates_) out.push_back(n.name);
  return out;
}

const std::string& ChatTemplate::source_named(std::string_view name) const {
  for (auto& n : templates_)
    if (n.name == name) return n.program->source;
  throw Error("no chat template named \"" + std::string(name) + "\"");
}

}  // namespace tessera

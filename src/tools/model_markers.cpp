#include "tools/model_markers.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tessera::tools {
namespace {

std::optional<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `skip_key`: a top-level key whose value is not built (tokenizer.json's large "model").
std::optional<nlohmann::json> read_json(const std::filesystem::path& path, std::string_view skip_key = {}) {
  auto text = read_text(path);
  if (!text) return std::nullopt;
  nlohmann::json::parser_callback_t skip = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& value) {
    return !(event == nlohmann::json::parse_event_t::key && depth == 1 && value == skip_key);
  };
  auto j = nlohmann::json::parse(*text, skip_key.empty() ? nullptr : skip, false);
  TESSERA_CHECK(!j.is_discarded(), path.string() + ": not valid JSON");
  return j;
}

std::string template_of(const nlohmann::json& value, const std::filesystem::path& path) {
  if (value.is_string()) return value.get<std::string>();
  TESSERA_CHECK(value.is_array(), path.string() + ": chat_template must be a string or a list of named templates");
  std::string first;
  for (const auto& entry : value) {
    TESSERA_CHECK(entry.is_object() && entry.contains("template") && entry["template"].is_string(),
                  path.string() + ": chat_template entries need a \"template\" string");
    if (first.empty()) first = entry["template"].get<std::string>();
    if (entry.value("name", "") == "default") return entry["template"].get<std::string>();
  }
  return first;
}

}  // namespace

ModelMarkers read_model_markers(const std::filesystem::path& dir) {
  ModelMarkers markers;
  bool found = false;
  auto config_path = dir / "tokenizer_config.json";
  if (auto config = read_json(config_path)) {
    found = true;
    if (auto it = config->find("chat_template"); it != config->end() && !it->is_null())
      markers.chat_template = template_of(*it, config_path);
    // Added tokens are also listed here, which covers models without a tokenizer.json.
    if (auto it = config->find("added_tokens_decoder"); it != config->end() && it->is_object())
      for (const auto& [id, token] : it->items())
        if (token.is_object() && token.contains("content") && token["content"].is_string())
          markers.added_tokens.push_back(token["content"].get<std::string>());
  }
  if (markers.chat_template.empty()) {
    if (auto text = read_text(dir / "chat_template.jinja")) {
      found = true;
      markers.chat_template = *text;
    }
  }
  auto tokenizer_path = dir / "tokenizer.json";
  if (auto tokenizer = read_json(tokenizer_path, "model")) {
    found = true;
    if (auto it = tokenizer->find("added_tokens"); it != tokenizer->end() && it->is_array())
      for (const auto& token : *it)
        if (token.is_object() && token.contains("content") && token["content"].is_string())
          markers.added_tokens.push_back(token["content"].get<std::string>());
  }
  TESSERA_CHECK(found, dir.string() + ": no tokenizer_config.json, chat_template.jinja or tokenizer.json");
  return markers;
}

FormatGuess infer_model_format(const std::filesystem::path& dir) {
  ModelMarkers markers = read_model_markers(dir);
  return infer_format(markers.chat_template, markers.added_tokens);
}

}  // namespace tessera::tools

#include "tools/values.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include "tools/scan.h"

namespace tessera::tools {

ToolSet::ToolSet(const nlohmann::json& tools) {
  if (tools.is_array()) tools_ = tools;
}

const nlohmann::json* ToolSet::parameter(const std::string& tool, const std::string& name) const {
  for (const auto& entry : tools_) {
    const auto& fn = entry.contains("function") ? entry["function"] : entry;
    if (!fn.is_object() || fn.value("name", "") != tool) continue;
    auto params = fn.find("parameters");
    if (params == fn.end() || !params->is_object()) return nullptr;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return nullptr;
    auto it = props->find(name);
    return it == props->end() ? nullptr : &*it;
  }
  return nullptr;
}

namespace {

// The schema's type names, including the loose spellings models' tool definitions use.
std::vector<std::string> schema_types(const nlohmann::json& schema) {
  std::vector<std::string> types;
  auto add = [&](const nlohmann::json& t) {
    if (t.is_string()) types.push_back(t.get<std::string>());
  };
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_array()) {
      for (const auto& t : *it) add(t);
    } else {
      add(*it);
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array())
      for (const auto& sub : *it)
        if (sub.is_object()) add(sub.value("type", nlohmann::json()));
  }
  return types;
}

std::optional<ordered_json> parse_bool(std::string_view s) {
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true") return ordered_json(true);
  if (lower == "false") return ordered_json(false);
  return std::nullopt;
}

std::optional<ordered_json> parse_json(std::string_view s) {
  auto value = ordered_json::parse(s, nullptr, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

void skip_space(std::string_view text, size_t& pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
}

std::optional<std::string> parse_python_string(std::string_view text, size_t& pos) {
  char quote = text[pos++];
  std::string out;
  while (pos < text.size()) {
    char c = text[pos++];
    if (c == quote) return out;
    if (c != '\\' || pos >= text.size()) {
      out += c;
      continue;
    }
    char e = text[pos++];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': case '\'': case '"': out += e; break;
      default: out += '\\'; out += e;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ordered_json> parse_number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  long long i = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && p == s.data() + s.size()) return ordered_json(i);
  double d = 0;
  auto [q, ec2] = std::from_chars(s.data(), s.data() + s.size(), d);
  // "inf" and "nan" are words, not JSON numbers.
  if (ec2 == std::errc() && q == s.data() + s.size() && std::isfinite(d)) return ordered_json(d);
  return std::nullopt;
}

std::optional<ordered_json> parse_python_value(std::string_view text, size_t& pos) {
  skip_space(text, pos);
  if (pos >= text.size()) return std::nullopt;
  char c = text[pos];
  if (c == '\'' || c == '"') {
    auto s = parse_python_string(text, pos);
    if (!s) return std::nullopt;
    return ordered_json(*s);
  }
  if (c == '[' || c == '(') {
    char close = c == '[' ? ']' : ')';
    ++pos;
    ordered_json arr = ordered_json::array();
    while (true) {
      skip_space(text, pos);
      if (pos < text.size() && text[pos] == close) {
        ++pos;
        return arr;
      }
      auto v = parse_python_value(text, pos);
      if (!v) return std::nullopt;
      arr.push_back(std::move(*v));
      skip_space(text, pos);
      if (pos < text.size() && text[pos] == ',') ++pos;
      else if (pos >= text.size() || text[pos] != close) return std::nullopt;
    }
  }
  if (c == '{') {
    ++pos;
    ordered_json obj = ordered_json::object();
    while (true) {
      skip_space(text, pos);
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return obj;
      }
      auto key = parse_python_value(text, pos);
      if (!key) return std::nullopt;
      skip_space(text, pos);
      if (pos >= text.size() || text[pos] != ':') return std::nullopt;
      ++pos;
      auto v = parse_python_value(text, pos);
      if (!v) return std::nullopt;
      obj[key->is_string() ? key->get<std::string>() : key->dump()] = std::move(*v);
      skip_space(text, pos);
      if (pos < text.size() && text[pos] == ',') ++pos;
      else if (pos >= text.size() || text[pos] != '}') return std::nullopt;
    }
  }
  size_t start = pos;
  while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '.' ||
                               text[pos] == '-' || text[pos] == '+' || text[pos] == '_'))
    ++pos;
  std::string_view word = text.substr(start, pos - start);
  if (word == "True" || word == "true") return ordered_json(true);
  if (word == "False" || word == "false") return ordered_json(false);
  if (word == "None" || word == "null") return ordered_json(nullptr);
  return parse_number(word);
}

std::optional<ordered_json> parse_literal(std::string_view text) {
  text = trim(text);
  if (auto v = parse_json(text)) return v;
  size_t pos = 0;
  auto v = parse_python_value(text, pos);
  skip_space(text, pos);
  if (v && pos == text.size()) return v;
  return std::nullopt;
}

ordered_json typed_value(std::string_view text, const nlohmann::json* schema, bool json_when_untyped) {
  std::vector<std::string> types = schema ? schema_types(*schema) : std::vector<std::string>{};
  std::string_view t = trim(text);
  for (const auto& type : types) {
    if (type == "string" || type == "str" || type == "text") {
      // A model may quote a string value: "London" means London.
      if (t.size() >= 2 && t.front() == '"' && t.back() == '"')
        if (auto v = parse_json(t); v && v->is_string()) return *v;
      return ordered_json(std::string(text));
    }
  }
  for (const auto& type : types) {
    std::optional<ordered_json> v;
    if (type == "integer" || type == "int" || type == "number" || type == "float") v = parse_number(t);
    else if (type == "boolean" || type == "bool") v = parse_bool(t);
    else if (type == "null" && (t == "null" || t == "None")) v = ordered_json(nullptr);
    else if (type == "object" || type == "dict" || type == "array" || type == "list") v = parse_literal(t);
    if (v) return *v;
  }
  if (!types.empty() || json_when_untyped)
    if (auto v = parse_json(t)) return *v;
  return ordered_json(std::string(text));
}

std::string arguments_text(const ordered_json& arguments) {
  return arguments.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace tessera::tools

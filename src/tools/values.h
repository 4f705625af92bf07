// Argument values: the tools' JSON schemas, typing a raw value by its schema, and Python
// literals (some models write {'a': True} where JSON is meant).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tessera::tools {

using ordered_json = nlohmann::ordered_json;

// The OpenAI `tools` array, looked up by function name.
class ToolSet {
 public:
  ToolSet() = default;
  explicit ToolSet(const nlohmann::json& tools);
  // The JSON schema of one parameter, or nullptr when the tool or parameter is unknown.
  const nlohmann::json* parameter(const std::string& tool, const std::string& name) const;

 private:
  nlohmann::json tools_ = nlohmann::json::array();
};

// Converts the text a model wrote for one parameter into a JSON value by the parameter's
// schema (string, number, integer, boolean, object, array, null). Without a schema the text
// stays a string, or, with `json_when_untyped`, becomes the JSON value it spells when it is one.
ordered_json typed_value(std::string_view text, const nlohmann::json* schema, bool json_when_untyped);

// An integer (kept exact) or a floating-point number spelling the whole text ("108." too).
std::optional<ordered_json> parse_number(std::string_view text);

// Parses JSON, else a Python literal (single quotes, True/False/None, tuples); nullopt if neither.
std::optional<ordered_json> parse_literal(std::string_view text);

// Parses one Python literal starting at `pos` (advanced past it).
std::optional<ordered_json> parse_python_value(std::string_view text, size_t& pos);

// OpenAI's arguments string for a value: objects as compact JSON text.
std::string arguments_text(const ordered_json& arguments);

}  // namespace tessera::tools

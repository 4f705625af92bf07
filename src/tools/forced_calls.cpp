// tool_choice "required" or a named function, held by a grammar: after any reasoning the model
// writes its calls as JSON, whatever its own tool format, and this parser reads them back.
#include "core/error.h"
#include "tools/formats.h"
#include "tools/log.h"
#include "tools/parser.h"
#include "tools/values.h"

namespace tessera::tools {
namespace {

// Prefixes every in-schema reference ("#...") with `base`: the schema moves to that place in
// the new root, and its references must still reach what they named.
void rebase_refs(ordered_json& s, const std::string& base) {
  if (s.is_object()) {
    for (auto& [key, v] : s.items()) {
      if (key == "$ref" && v.is_string() && v.get<std::string>().rfind('#', 0) == 0)
        v = base + v.get<std::string>().substr(1);
      else
        rebase_refs(v, base);
    }
  } else if (s.is_array()) {
    for (auto& v : s) rebase_refs(v, base);
  }
}

// A tool's parameters schema: an object with no members where the tool declares none.
ordered_json parameters_of(const ordered_json& function) {
  auto it = function.find("parameters");
  if (it == function.end() || it->is_null())
    return ordered_json{{"type", "object"}, {"properties", ordered_json::object()}};
  return *it;
}

class ForcedCallParser : public StreamParser {
 public:
  explicit ForcedCallParser(const ParserOptions& o) : choice_(o.tool_choice), id_prefix_(o.call_id_prefix) {}

  // The calls are whole only at the end (the grammar ends the text with them).
  Delta feed(std::string_view piece) override {
    text_ += piece;
    return {};
  }

  Delta finish(bool truncated) override {
    Delta out;
    if (truncated) {
      if (text_.find_first_not_of(" \t\r\n") != std::string::npos)
        warn("tool call cut by max_tokens dropped");
      return out;
    }
    const auto v = ordered_json::parse(text_, nullptr, false);
    if (v.is_discarded()) {  // only if the grammar was not followed (a stop string cut the text)
      warn("tool call dropped: its text is not JSON: " + text_);
      return out;
    }
    if (choice_.mode == ToolChoiceMode::Named) {
      emit(choice_.name, v, out);
    } else if (v.is_array()) {
      for (const auto& call : v)
        if (call.is_object() && call.contains("name") && call["name"].is_string())
          emit(call["name"].get<std::string>(), call.value("arguments", ordered_json::object()), out);
    }
    return out;
  }

 private:
  void emit(const std::string& name, const ordered_json& arguments, Delta& out) {
    const int index = next_index_++;
    out.tool_calls.push_back({index, id_prefix_ + std::to_string(index), name, ""});
    out.tool_calls.push_back({index, "", "", arguments_text(arguments)});
  }

  ToolChoice choice_;
  std::string id_prefix_;
  std::string text_;
  int next_index_ = 0;
};

}  // namespace

ordered_json forced_calls_schema(const ordered_json& tools, const ToolChoice& choice, bool parallel) {
  if (!tools.is_array() || tools.empty())
    throw Error("tool_choice \"required\" or a named function needs a non-empty 'tools'");
  std::vector<const ordered_json*> functions;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      throw Error(
          "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}");
    functions.push_back(&t["function"]);
  }
  if (choice.mode == ToolChoiceMode::Named) {
    for (const ordered_json* f : functions)
      if ((*f)["name"] == choice.name) return parameters_of(*f);
    throw Error("tool_choice names '" + choice.name + "', which is not among the tools");
  }
  TESSERA_CHECK(choice.mode == ToolChoiceMode::Required, "forced_calls_schema: tool_choice forces no call");
  // Each tool's parameters live under $defs (references rebased there), so that references
  // inside them keep their targets.
  ordered_json defs = ordered_json::object(), calls = ordered_json::array();
  for (size_t i = 0; i < functions.size(); ++i) {
    const std::string key = "tool_" + std::to_string(i);
    ordered_json params = parameters_of(*functions[i]);
    rebase_refs(params, "#/$defs/" + key);
    defs[key] = std::move(params);
    calls.push_back(
        {{"type", "object"},
         {"properties",
          {{"name", {{"const", (*functions[i])["name"]}}}, {"arguments", {{"$ref", "#/$defs/" + key}}}}},
         {"required", ordered_json::array({"name", "arguments"})}});
  }
  ordered_json schema = {{"type", "array"}, {"items", {{"anyOf", std::move(calls)}}}, {"minItems", 1}};
  if (!parallel) schema["maxItems"] = 1;
  schema["$defs"] = std::move(defs);
  return schema;
}

std::unique_ptr<StreamParser> make_forced_call_parser(const ParserOptions& options) {
  return std::make_unique<ForcedCallParser>(options);
}

}  // namespace tessera::tools

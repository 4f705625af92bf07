// Tool-call and reasoning parsing of model output, streamed or whole.
//
// One StreamParser per response: feed() it the detokenized text as it arrives, then finish().
// The whole-text parse is the same object fed one piece, so streamed deltas always add up to
// the whole result. Text that may be the start of a marker is held back until it is known.
//
// Per request (a server):
//   ParserOptions options;             // formats from infer_model_format() or the flags
//   options.tools = body["tools"];  options.tool_choice = ToolChoice::from_json(body["tool_choice"]);
//   options.starts_in_reasoning = prompt_opens_reasoning(prompt, options.reasoning_format);
//   options.call_id_prefix = "call_" + request_id + "_";   // ids unique across requests
//   auto parser = make_parser(options);
//   for each detokenized piece (special tokens kept: markers are often special tokens):
//     Delta d = parser->feed(piece);   if (!d.empty()) send d as a chunk
//   Delta last = parser->finish(finish_reason == "length");
// Calls come out whole (a header event, then the arguments) once they are finished, so a call
// cut by max_tokens is never half-announced.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tools/delta.h"

namespace tessera::tools {

class StreamParser {
 public:
  virtual ~StreamParser() = default;
  virtual Delta feed(std::string_view piece) = 0;
  // End of output. `truncated`: max_tokens cut it, so an open tool call is dropped (with a
  // warning) rather than returned as text.
  virtual Delta finish(bool truncated) = 0;
};

enum class ToolChoiceMode { Auto, None, Required, Named };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::Auto;
  std::string name;  // the function, for Named
  // OpenAI's tool_choice: "auto" | "none" | "required" | {"type":"function","function":{"name":..}}.
  static ToolChoice from_json(const nlohmann::json& value);
};

struct ParserOptions {
  std::string tool_format;       // a registered tool format ("" = no tool-call parsing)
  std::string reasoning_format;  // a registered reasoning format ("" = none)
  nlohmann::json tools = nlohmann::json::array();  // OpenAI `tools`: schemas type the values
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  // The prompt left a reasoning block open (e.g. ends with "<think>"): output starts inside it.
  bool starts_in_reasoning = false;
  std::string call_id_prefix = "call_";  // ids are prefix + index unless the format names them
  // The calls are held by a grammar (forced_calls_schema): after any reasoning the output is the
  // calls' JSON, read in place of the model's own tool format.
  bool forced_calls = false;
};

// Throws tessera::Error naming an unknown format.
std::unique_ptr<StreamParser> make_parser(const ParserOptions& options);

// tool_choice "required" or a named function, as vLLM holds it: whatever the model's own tool
// format, a grammar makes it write the calls as JSON, the named function's arguments or an
// array of {"name", "arguments"} objects (the shape hermes-style models are trained to write;
// at most one without parallel calls). This is the JSON Schema of that text. Throws
// tessera::Error for no tools or a name not among them.
nlohmann::ordered_json forced_calls_schema(const nlohmann::ordered_json& tools, const ToolChoice& choice,
                                           bool parallel);

// Whether a model's formats let a grammar force its calls: not harmony's (gpt-oss), whose
// channels carry the calls and the reasoning in one grammar of its own.
bool calls_can_be_forced(std::string_view tool_format, std::string_view reasoning_format);

// Parses a whole output: make_parser, one feed, finish.
Message parse_text(std::string_view text, const ParserOptions& options, bool truncated = false);

}  // namespace tessera::tools

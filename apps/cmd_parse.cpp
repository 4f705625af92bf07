// tessera parse: one model output on stdin -> its content, reasoning and tool calls as JSON.
//   tessera parse --format hermes [--tools tools.json] < output.txt
//   tessera parse --format auto -m MODEL_DIR --stream < output.txt
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "command.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tools/model_markers.h"
#include "tools/parser.h"

namespace {

using namespace tessera;

std::string read_all(std::istream& in) { return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()}; }

// The pieces a generating model would hand over: its token ids, decoded one at a time.
std::vector<std::string> token_pieces(std::string_view text, const std::string& model_dir) {
  Tokenizer tok = Tokenizer::load(model_dir);
  StreamDecoder decoder(tok, /*skip_special=*/false);
  std::vector<std::string> pieces;
  for (int32_t id : tok.encode(text, /*add_special_tokens=*/false, /*parse_special=*/true))
    pieces.push_back(decoder.push(id));
  pieces.push_back(decoder.flush());
  return pieces;
}

nlohmann::ordered_json to_json(const tools::Message& message) {
  nlohmann::ordered_json out;
  out["content"] = message.content;
  out["reasoning"] = message.reasoning ? nlohmann::ordered_json(*message.reasoning) : nlohmann::ordered_json();
  out["tool_calls"] = nlohmann::ordered_json::array();
  for (const auto& call : message.tool_calls) {
    // Arguments as a JSON value; text the model wrote that is not JSON stays a string.
    auto args = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
    if (args.is_discarded()) args = call.arguments;
    out["tool_calls"].push_back({{"name", call.name}, {"arguments", args}});
  }
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"Parse one model output (stdin) into content, reasoning and tool calls"};
  std::string format, reasoning, tools_path, model_dir, tool_choice = "auto";
  bool stream = false, truncated = false, in_reasoning = false, no_parallel = false;
  app.add_option("--format,--tool-parser", format, "tool-call format, or 'auto' to infer it from -m")->required();
  app.add_option("--reasoning,--reasoning-parser", reasoning, "reasoning format (inferred with --format auto)");
  app.add_option("--tools", tools_path, "JSON file with the OpenAI tools array (types the arguments)");
  app.add_option("-m,--model", model_dir, "model directory (tokenizer_config.json, tokenizer.json)");
  app.add_flag("--stream", stream, "feed the output through the streaming parser token by token");
  app.add_flag("--truncated", truncated, "the output was cut by max_tokens");
  app.add_flag("--starts-in-reasoning", in_reasoning, "the prompt left a reasoning block open");
  app.add_option("--tool-choice", tool_choice, "auto, none, required, or a function name");
  app.add_flag("--no-parallel-tool-calls", no_parallel, "keep only the first tool call");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  tools::ParserOptions options;
  options.tool_format = format;
  options.reasoning_format = reasoning;
  options.starts_in_reasoning = in_reasoning;
  options.parallel_tool_calls = !no_parallel;
  if (tool_choice == "auto" || tool_choice == "none" || tool_choice == "required")
    options.tool_choice = tools::ToolChoice::from_json(tool_choice);
  else
    options.tool_choice = {tools::ToolChoiceMode::Named, tool_choice};
  tools::ModelMarkers markers;
  if (!model_dir.empty()) markers = tools::read_model_markers(model_dir);
  TESSERA_CHECK(!stream || !model_dir.empty(), "--stream needs -m MODEL_DIR (its tokenizer cuts the output into tokens)");
  if (format == "auto") {
    TESSERA_CHECK(!model_dir.empty(), "--format auto needs -m MODEL_DIR");
    auto guess = tools::infer_format(markers.chat_template, markers.added_tokens);
    options.tool_format = guess.tool;
    if (reasoning.empty()) options.reasoning_format = guess.reasoning;
    std::fprintf(stderr, "tessera parse: format %s, reasoning %s\n", guess.tool.empty() ? "(none)" : guess.tool.c_str(),
                 options.reasoning_format.empty() ? "(none)" : options.reasoning_format.c_str());
  }
  if (!tools_path.empty()) {
    std::ifstream in(tools_path);
    TESSERA_CHECK(in.good(), "cannot open " + tools_path);
    auto tools = nlohmann::json::parse(read_all(in), nullptr, false);
    TESSERA_CHECK(!tools.is_discarded(), tools_path + ": not valid JSON");
    if (tools.is_object() && tools.contains("tools")) tools = tools["tools"];
    TESSERA_CHECK(tools.is_array(), tools_path + ": expected the OpenAI tools array");
    options.tools = tools;
  }

  std::string text = read_all(std::cin);
  tools::Message message;
  if (stream) {
    auto parser = tools::make_parser(options);
    tools::MessageBuilder builder;
    for (const auto& piece : token_pieces(text, model_dir)) builder.add(parser->feed(piece));
    builder.add(parser->finish(truncated));
    message = builder.result();
  } else {
    message = tools::parse_text(text, options, truncated);
  }
  std::cout << to_json(message).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return 0;
}

const app::Register reg{"parse", "parse a model output into content, reasoning and tool calls", run};

}  // namespace

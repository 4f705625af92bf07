// tessera tokenize: text -> token ids (or ids -> text with --decode) with a model's tokenizer.json.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "command.h"
#include "token_ids.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Tokenize text with a model's tokenizer.json (or decode ids)", "tessera tokenize"};
  std::string model, text, decode_ids;
  bool special = false, as_json = false, from_stdin = false, skip_special = false;
  app.add_option("-m,--model", model, "Model directory or tokenizer.json")->required();
  app.add_flag("--special", special, "Add the post-processor's special tokens (e.g. BOS)");
  app.add_flag("--json", as_json, "Print {\"ids\": [...], \"tokens\": [...]}");
  app.add_flag("--stdin", from_stdin, "Read the text from standard input");
  app.add_option("--decode", decode_ids, "Decode these space-separated ids instead of encoding");
  app.add_flag("--skip-special", skip_special, "With --decode: leave out special tokens");
  app.add_option("text", text, "Text to encode");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  auto tok = tessera::Tokenizer::load(model);
  if (app.count("--decode")) {
    std::vector<int32_t> ids = tessera::app::parse_token_ids(decode_ids, "--decode");
    std::string out = tok.decode(ids, skip_special);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  if (from_stdin) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else if (!app.count("text")) {
    throw tessera::Error("give the TEXT to encode, or --stdin, or --decode IDS");
  }
  auto ids = tok.encode(text, special);
  if (as_json) {
    nlohmann::json j;
    j["ids"] = ids;
    auto& toks = j["tokens"] = nlohmann::json::array();
    for (int32_t id : ids) toks.push_back(tok.id_to_token(id));
    std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%s\n", s.c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

const tessera::app::Register reg{"tokenize", "text -> token ids (or --decode ids -> text) with tokenizer.json", run};

}  // namespace

// tessera template: render a chat template for a conversation, exactly as transformers would.
//   tessera template -m DIR --context FILE.json [--template FILE.jinja]
// Prints the prompt with nothing added (continue_final_message true in the context cuts it where the
// final message ends, as transformers does); a template error goes to stderr with exit code 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "command.h"
#include "core/error.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Render a model's chat template for a conversation (messages, tools, variables)", "tessera template"};
  std::string model_dir, context_file, template_file;
  app.add_option("-m,--model", model_dir, "model directory (tokenizer_config.json, chat_template.jinja, ...)");
  app.add_option(
         "--context", context_file,
         "JSON object: messages, tools, add_generation_prompt, continue_final_message, other variables")
      ->required();
  app.add_option("--template,--chat-template", template_file, "render this template file instead of the model's");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (model_dir.empty() && template_file.empty()) {
    std::fprintf(stderr, "tessera template: error: give -m DIR or --template FILE\n");
    return 2;
  }

  std::ifstream in(context_file, std::ios::binary);
  if (!in) throw tessera::Error("cannot read " + context_file);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::ordered_json context;
  try {
    context = nlohmann::ordered_json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw tessera::Error(context_file + ": invalid JSON: " + e.what());
  }
  if (!context.is_object()) throw tessera::Error(context_file + ": expected a JSON object");

  try {
    tessera::ChatTemplate tmpl = model_dir.empty() ? tessera::ChatTemplate::from_file(template_file)
                                                   : tessera::ChatTemplate::from_model_dir(model_dir, template_file);
    std::string out = tmpl.render(context);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const tessera::chat::TemplateError& e) {
    std::fprintf(stderr, "tessera template: %s\n", e.what());
    return 2;
  }
}

const tessera::app::Register reg{"template", "render a chat template for a conversation", run};

}  // namespace

// Renders a 10-message conversation with 3 tools through real chat templates (parsed once) and
// prints the time per render. usage: bench_chat_template [TEMPLATES_DIR] [CONTEXT.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "chat/chat_template.h"
#include "chat/parser.h"

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path templates = argc > 1 ? argv[1] : TESSERA_REFERENCE_DIR "/chat-templates/templates";
  std::filesystem::path context_file = argc > 2 ? argv[2] : TESSERA_BENCH_DIR "/conversation_10.json";
  if (!std::filesystem::exists(templates)) {
    std::fprintf(stderr, "templates not found at %s (pass the folder as the first argument)\n", templates.c_str());
    return 1;
  }
  auto context = nlohmann::ordered_json::parse(read(context_file));
  // render() includes turning the JSON context into template values, as every server request does.
  std::printf("| template | parse median (µs) | render median (µs) | render p90 (µs) | prompt bytes |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const char* name : {"Qwen-Qwen3-0.6B.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                           "Qwen-Qwen2.5-7B-Instruct.jinja", "openai-gpt-oss-120b.jinja"}) {
    std::string src = read(templates / name);
    std::vector<double> parses;
    for (int i = 0; i < 50; ++i) {  // the parser itself (ChatTemplate caches parses by source)
      double t0 = now_us();
      tessera::chat::parse(src);
      parses.push_back(now_us() - t0);
    }
    std::sort(parses.begin(), parses.end());
    double parse_us = parses[parses.size() / 2];
    auto tmpl = tessera::ChatTemplate::from_string(src);
    std::string out = tmpl.render(context);
    std::vector<double> times;
    for (int i = 0; i < 2000; ++i) {
      double s = now_us();
      out = tmpl.render(context);
      times.push_back(now_us() - s);
    }
    std::sort(times.begin(), times.end());
    std::printf("| %s | %.0f | %.1f | %.1f | %zu |\n", name, parse_us, times[times.size() / 2],
                times[times.size() * 9 / 10], out.size());
  }
  return 0;
}

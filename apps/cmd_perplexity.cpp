// tessera perplexity: the standard sliding-window perplexity of a text file.
// Window k covers tokens [k*stride, k*stride + context); it scores the tokens after the previous
// window's end (the first window: all but its first token), so every token but the first is
// scored once, with up to context-1 tokens before it. ppl = exp(mean NLL).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "command.h"
#include "engine/engine.h"
#include "model_options.h"

namespace tessera::app {
namespace {

int run(int argc, char** argv) {
  CLI::App app{"Perplexity of a text file (sliding window)", "tessera perplexity"};
  ModelOptions mo;
  add_model_options(app, mo);
  std::string file;
  int context = 512, stride = 256;
  bool add_special = false;
  app.add_option("-f,--file", file, "Text file")->required()->check(CLI::ExistingFile);
  app.add_option("--context", context, "Window length in tokens")->check(CLI::Range(2, 1 << 20));
  app.add_option("--stride", stride, "Tokens the window advances by")->check(CLI::PositiveNumber);
  app.add_flag("--add-special", add_special, "Tokenize with the tokenizer's special tokens (e.g. a leading BOS)");
  CLI11_PARSE(app, argc, argv);
  TESSERA_CHECK(stride <= context, "--stride must not exceed --context");

  LoadedRuntime rt = load_runtime(mo);
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<int32_t> ids = rt.encode_text(ss.str(), add_special);
  TESSERA_CHECK(ids.size() >= 2, file + ": fewer than two tokens");

  EngineConfig ec;
  ec.num_blocks = (context + 15) / 16 + 1;
  ec.max_model_len = std::max(context, mo.max_model_len);
  ec.kv_cache_dtype = rt.kv_cache_dtype;
  ec.enforce_eager = mo.enforce_eager;
  ec.scheduler.max_num_batched_tokens = context;
  Engine engine(*rt.loaded.model, *rt.backend, ec);

  auto t0 = std::chrono::steady_clock::now();
  double nll = 0;
  int64_t scored = 0, windows = 0, n = int64_t(ids.size()), prev_end = 0;
  for (int64_t begin = 0; prev_end < n; begin += stride) {
    int64_t end = std::min(begin + context, n);
    std::vector<int32_t> window(ids.begin() + begin, ids.begin() + end);
    std::vector<double> lp = engine.score(window);  // lp[i]: log p(window[i+1] | window[..i])
    int64_t first = std::max<int64_t>(prev_end, begin + 1) - begin - 1;
    for (size_t i = size_t(first); i < lp.size(); ++i) nll -= lp[i], ++scored;
    prev_end = end;
    ++windows;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("perplexity: %.4f\n", std::exp(nll / double(scored)));
  std::fprintf(stderr, "tokens: %lld, scored: %lld, windows: %lld, context: %d, stride: %d, mean nll: %.6f, %.1f tok/s\n",
               (long long)n, (long long)scored, (long long)windows, context, stride, nll / double(scored),
               double(scored) / secs);
  return 0;
}

const Register reg{"perplexity", "Perplexity of a text file with a model (sliding window)", run};

}  // namespace
}  // namespace tessera::app

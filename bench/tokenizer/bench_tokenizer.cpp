// Tokenizer benchmark: single-thread encode throughput (MB/s) on a few MB of mixed text and the
// load time of tokenizer.json, for Tessera and Hugging Face tokenizers (npm binding) in the same
// run (load: best of the repeats; tessera's loader uses a few threads). The text comes from
// bench_text.sh; it is cut into chunks of about 8 KB at line ends
// (prompt-sized pieces), and both sides encode the same chunks one call at a time.
//
// Usage: bench_tokenizer TEXT_FILE [MODEL_DIR...]   (default models: llama3 and gemma3 from
// tests/node_modules/@lenml)
#include <time.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double thread_cpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

std::vector<std::string> make_chunks(const std::string& text, size_t target) {
  std::vector<std::string> chunks;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.size(), start + target);
    size_t nl = text.find('\n', end);
    end = nl == std::string::npos ? text.size() : nl + 1;
    chunks.push_back(text.substr(start, end - start));
    start = end;
  }
  return chunks;
}

nlohmann::json run_hf(const std::filesystem::path& tokenizer_json, const std::filesystem::path& chunks, int repeats) {
  std::string cmd = "node \"" + std::string(TESSERA_SOURCE_DIR) + "/bench/tokenizer/hf_bench.js\" \"" +
                    tokenizer_json.string() + "\" \"" + chunks.string() + "\" " + std::to_string(repeats);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (!p || pclose(p) != 0 || out.empty()) return nullptr;
  return nlohmann::json::parse(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_tokenizer TEXT_FILE [MODEL_DIR...]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  // The reference reads text as UTF-8; give both sides the same valid text.
  std::string text = tessera::tok::utf8_lossy(ss.str());
  auto chunks = make_chunks(text, 8192);
  auto chunks_file = std::filesystem::temp_directory_path() / "tessera_bench_chunks.jsonl";
  {
    std::ofstream f(chunks_file, std::ios::binary);
    for (auto& c : chunks) f << nlohmann::json(c).dump() << "\n";
  }
  std::vector<std::filesystem::path> models;
  for (int i = 2; i < argc; ++i) models.emplace_back(argv[i]);
  if (models.empty()) {
    auto nm = std::filesystem::path(TESSERA_SOURCE_DIR) / "tests" / "node_modules" / "@lenml";
    models = {nm / "tokenizer-llama3" / "models", nm / "tokenizer-gemma3" / "models"};
  }
  const int repeats = 3;
  std::printf("text: %s, %.2f MB in %zu chunks, single thread, best of %d\n", argv[1], text.size() / 1e6,
              chunks.size(), repeats);
  std::printf("MB/s by wall time, and by CPU time (this thread; the node process for HF): the CPU figures\n"
              "are steadier when other work shares the machine.\n\n");
  std::printf("%-18s %9s %9s %8s %9s %9s %8s %10s %9s %6s\n", "tokenizer", "tessera", "hf", "speedup", "tessera",
              "hf", "speedup", "tessera", "hf", "same");
  std::printf("%-18s %9s %9s %8s %9s %9s %8s %10s %9s %6s\n", "", "wall MB/s", "wall MB/s", "", "cpu MB/s",
              "cpu MB/s", "", "load ms", "load ms", "tokens");
  for (auto& m : models) {
    double load_ms = 1e30;
    auto t0 = Clock::now();
    for (int r = 0; r < repeats; ++r) {
      t0 = Clock::now();
      tessera::Tokenizer::load(m);
      load_ms = std::min(load_ms, since(t0) * 1e3);
    }
    auto tok = tessera::Tokenizer::load(m);
    double best = 1e30, best_cpu = 1e30;
    size_t tokens = 0;
    for (int r = 0; r < repeats; ++r) {
      tokens = 0;
      t0 = Clock::now();
      double c0 = thread_cpu();
      for (auto& c : chunks) tokens += tok.encode(c).size();
      best_cpu = std::min(best_cpu, thread_cpu() - c0);
      best = std::min(best, since(t0));
    }
    double mbs = text.size() / 1e6 / best, cpu_mbs = text.size() / 1e6 / best_cpu;
    auto hf = run_hf(m / "tokenizer.json", chunks_file, repeats);
    std::string name = m.parent_path().filename().string();
    if (hf.is_null()) {
      std::printf("%-18s %9.2f %9s %8s %9.2f %9s %8s %10.1f %9s %6s\n", name.c_str(), mbs, "n/a", "", cpu_mbs, "n/a",
                  "", load_ms, "n/a", "");
      continue;
    }
    double hf_mbs = hf["mb_s"].get<double>(), hf_cpu = hf["cpu_mb_s"].get<double>();
    bool same = hf["tokens"].get<size_t>() == tokens;
    std::printf("%-18s %9.2f %9.2f %7.2fx %9.2f %9.2f %7.2fx %10.1f %9.1f %6s\n", name.c_str(), mbs, hf_mbs,
                mbs / hf_mbs, cpu_mbs, hf_cpu, cpu_mbs / hf_cpu, load_ms, hf["load_ms"].get<double>(), same ? "yes" : "NO");
  }
  std::filesystem::remove(chunks_file);
  return 0;
}

// Host sampler benchmark: sample() per row at Llama 3's vocabulary (128,256) for the common
// parameter sets, against the reference sampler it replaced (tests/engine/sampler_reference.h,
// which returns the same tokens: checked here too). Rows are LLM-like: N(0, 2.5) logits with a
// few tokens 10-20 above them; 16 rows in turn, so a row is not in L1/L2 when it is sampled,
// as when it has just been copied from the GPU.
//
// Times are thread CPU time per row, the best of the repeats (old and new take turns), so
// that other processes on a shared machine inflate them as little as possible.
//
// Usage: bench_sampler [REPEATS (default 5)] [VOCAB (default 128256)]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "sampler_reference.h"
#include "thread_cpu.h"

namespace {

using namespace tessera;

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

struct Case {
  const char* name;
  SamplingParams params;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  SamplingParams p;
  p.temperature = 0;
  c.push_back({"greedy", p});
  p = SamplingParams{};
  p.temperature = 0.8f;
  c.push_back({"temperature 0.8", p});
  p.top_p = 0.9f;
  c.push_back({"T 0.8, top_p 0.9", p});
  p.top_k = 50;
  p.top_p = 0.95f;
  c.push_back({"T 0.8, top_k 50, top_p 0.95", p});
  p = SamplingParams{};
  p.temperature = 0;
  p.logprobs = 5;
  c.push_back({"greedy, logprobs 5", p});
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  c.push_back({"T 0.8, top_p 0.9, logprobs 5", p});
  p = SamplingParams{};
  p.temperature = 0.8f;
  p.top_k = 50;
  p.repetition_penalty = 1.1f;
  p.presence_penalty = 0.5f;
  c.push_back({"T 0.8, top_k 50, penalties", p});
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  int V = argc > 2 ? std::atoi(argv[2]) : 128256;
  const int kRows = 16;
  std::mt19937_64 g(1);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> rows(size_t(kRows) * size_t(V));
  for (float& x : rows) x = normal(g);
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < 8; ++i) rows[size_t(r) * size_t(V) + g() % uint64_t(V)] += 10.0f + float(g() % 10);
  std::vector<int32_t> history(1000);  // 200 prompt + 800 output tokens, for the penalties
  for (int32_t& t : history) t = int32_t(g() % uint64_t(V));

  std::printf("vocab %d, %d rows in turn, best of %d; load average before: %s\n", V, kRows, repeats,
              loadavg().c_str());
  std::printf("| case | old µs/row | new µs/row | speedup |\n|---|---:|---:|---:|\n");
  for (const Case& c : cases()) {
    // As many rows per measurement as make ~0.2 s of the old sampler.
    Rng rng_old(5), rng_new(5);
    double t0 = thread_cpu();
    for (int r = 0; r < kRows; ++r) {
      const float* row = rows.data() + size_t(r) * size_t(V);
      SampleResult a = reference::sample(row, V, c.params, history, 200, rng_old);
      SampleResult b = sample(row, V, c.params, history, 200, rng_new);
      if (a.token != b.token || a.top != b.top || a.logprob != b.logprob) {
        std::fprintf(stderr, "%s: the new sampler differs from the reference\n", c.name);
        return 1;
      }
    }
    int n = std::max(kRows, int(0.2 / ((thread_cpu() - t0) / kRows) / 2));
    double best_old = 1e9, best_new = 1e9;
    for (int rep = 0; rep < repeats; ++rep) {
      for (bool old : {true, false}) {
        Rng rng(rep);
        double start = thread_cpu();
        int32_t sink = 0;
        for (int i = 0; i < n; ++i) {
          const float* row = rows.data() + size_t(i % kRows) * size_t(V);
          sink += old ? reference::sample(row, V, c.params, history, 200, rng).token
                      : sample(row, V, c.params, history, 200, rng).token;
        }
        double us = (thread_cpu() - start) / n * 1e6;
        (old ? best_old : best_new) = std::min(old ? best_old : best_new, us);
        if (sink == -1) std::printf(" ");
      }
    }
    std::printf("| %s | %.1f | %.1f | %.1f× |\n", c.name, best_old, best_new, best_old / best_new);
    std::fflush(stdout);
  }
  std::printf("load average after: %s\n", loadavg().c_str());
  return 0;
}

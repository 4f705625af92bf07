// End-to-end CPU throughput on a random-weight Llama-3.2-1B-shaped model (bf16, tied embeddings;
// or, with --bits, MLX-quantized as mlx-lm's convert writes it: every projection and the embedding
// as codes in groups of 64): writes the checkpoint (config.json + model.safetensors) to a
// temporary directory, loads it the way `tessera generate` does (load_model on the CPU backend),
// and measures through the engine prefill of 128 tokens, and decode at batch 1 and batch 8, next
// to the machine's read bandwidth.
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/fast_ops.h"
#include "core/threadpool.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "membw.h"
#include "models/model.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Shape1B {
  int hidden = 2048, intermediate = 8192, layers = 16, heads = 32, kv_heads = 8, head_dim = 64, vocab = 128256;
};

// bf16 values of about N(0, sd) from a cheap generator (a sum of 4 uniforms), enough to keep
// activations in a realistic range without spending a minute on random numbers.
Tensor random_bf16(Shape shape, float sd, float mean, uint64_t seed) {
  Tensor t = Tensor::empty(DType::BF16, std::move(shape));
  uint16_t* p = t.data<uint16_t>();
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    float u = float((s & 0xffff) + ((s >> 16) & 0xffff) + ((s >> 32) & 0xffff) + (s >> 48)) / 65536.0f - 2.0f;
    p[i] = f32_to_bf16(mean + u * sd * 1.7320508f);
  }
  return t;
}

// A [rows, in] weight as MLX's codes (random) in groups of 64, with bf16 scales and biases that
// spread each group's values over about N(0, sd): codes, scales and biases, in checkpoint order.
std::array<Tensor, 3> random_quantized(int64_t rows, int64_t in, int bits, float sd, uint64_t seed) {
  constexpr int kGroup = 64;
  Tensor codes = Tensor::empty(DType::U32, {rows, in * bits / 32});
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < codes.numel(); ++i)
    s ^= s << 13, s ^= s >> 7, s ^= s << 17, codes.data<uint32_t>()[i] = uint32_t(s);
  const float levels = float((1 << bits) - 1);
  return {codes, random_bf16({rows, in / kGroup}, 0.2f * 3.4f * sd / levels, 3.4f * sd / levels, seed + 1),
          random_bf16({rows, in / kGroup}, 0.1f * sd, -1.7f * sd, seed + 2)};
}

// bits 0: bf16 weights; else MLX-quantized.
void write_checkpoint(const fs::path& dir, const Shape1B& m, int bits) {
  fs::create_directories(dir);
  nlohmann::json cfg = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", m.hidden},
      {"intermediate_size", m.intermediate},
      {"num_hidden_layers", m.layers},
      {"num_attention_heads", m.heads},
      {"num_key_value_heads", m.kv_heads},
      {"head_dim", m.head_dim},
      {"vocab_size", m.vocab},
      {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 500000.0},
      {"rope_scaling",
       {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
        {"original_max_position_embeddings", 8192}}},
      {"tie_word_embeddings", true},
      {"torch_dtype", "bfloat16"},
      {"bos_token_id", 128000},
      {"eos_token_id", 128001},
  };
  if (bits) cfg["quantization"] = {{"group_size", 64}, {"bits", bits}};
  std::ofstream(dir / "config.json") << cfg.dump(2);

  const int H = m.hidden, I = m.intermediate, Dh = m.head_dim;
  std::vector<std::pair<std::string, Tensor>> ts;
  uint64_t seed = 1;
  // A projection or the embedding: bf16, or codes with scales and biases.
  auto weight = [&](const std::string& layer, int out, int in, float sd) {
    if (!bits) return ts.emplace_back(layer + ".weight", random_bf16({out, in}, sd, 0, seed++)), void();
    auto [codes, scales, biases] = random_quantized(out, in, bits, sd, seed += 3);
    ts.emplace_back(layer + ".weight", codes);
    ts.emplace_back(layer + ".scales", scales);
    ts.emplace_back(layer + ".biases", biases);
  };
  weight("model.embed_tokens", m.vocab, H, 0.02f);
  for (int l = 0; l < m.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    auto lin = [&](const std::string& name, int out, int in) {
      weight(p + name.substr(0, name.size() - std::string(".weight").size()), out, in,
             1.0f / std::sqrt(float(in)));
    };
    ts.emplace_back(p + "input_layernorm.weight", random_bf16({H}, 0.05f, 1, seed++));
    lin("self_attn.q_proj.weight", m.heads * Dh, H);
    lin("self_attn.k_proj.weight", m.kv_heads * Dh, H);
    lin("self_attn.v_proj.weight", m.kv_heads * Dh, H);
    lin("self_attn.o_proj.weight", H, m.heads * Dh);
    ts.emplace_back(p + "post_attention_layernorm.weight", random_bf16({H}, 0.05f, 1, seed++));
    lin("mlp.gate_proj.weight", I, H);
    lin("mlp.up_proj.weight", I, H);
    lin("mlp.down_proj.weight", H, I);
  }
  ts.emplace_back("model.norm.weight", random_bf16({H}, 0.05f, 1, seed++));
  write_safetensors(dir / "model.safetensors", ts);
}

std::vector<int32_t> random_prompt(int n, int vocab, std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = int32_t(rng() % uint32_t(vocab));
  return ids;
}

// This process's resident memory now (VmRSS), in GB: the mapped weights it has read, the KV
// cache and the activations.
double resident_gb() {
  std::ifstream in("/proc/self/status");
  for (std::string key; in >> key;) {
    double kib = 0;
    if (key == "VmRSS:" && in >> kib) return kib * 1024 / 1e9;
    in.ignore(4096, '\n');
  }
  return 0;
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds used by this process so far: divided by wall time, the cores it actually had (the
// machine may be shared; a number well under the thread count means the run was starved).
double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Run {
  double prefill_s = 0, prefill_cpu_s = 0;  // the first step: every prompt token
  double decode_s = 0, decode_cpu_s = 0;    // the following steps
  int decode_steps = 0;
};

// `batch` sequences of `prompt_len` random tokens each, prefilled together in the first step and
// then decoded together for `decode_steps` steps (stop tokens ignored).
Run run_batch(LoadedModel& lm, Backend& be, int batch, int prompt_len, int decode_steps, std::mt19937& rng) {
  EngineConfig ec;
  ec.block_size = 16;
  ec.num_blocks = batch * ((prompt_len + decode_steps + 1 + 15) / 16 + 1);
  ec.scheduler.max_num_batched_tokens = std::max(2048, batch * prompt_len);
  Engine engine(*lm.model, be, ec);
  for (int b = 0; b < batch; ++b) {
    Request r;
    r.prompt = random_prompt(prompt_len, lm.model->vocab_size(), rng);
    r.max_tokens = decode_steps + 1;
    r.params.temperature = 0;
    engine.add_request(std::move(r));
  }
  Run run;
  auto t0 = Clock::now();
  double c0 = cpu_seconds();
  engine.step();
  run.prefill_s = since(t0);
  run.prefill_cpu_s = cpu_seconds() - c0;
  t0 = Clock::now();
  c0 = cpu_seconds();
  while (engine.has_work()) {
    engine.step();
    ++run.decode_steps;
  }
  run.decode_s = since(t0);
  run.decode_cpu_s = cpu_seconds() - c0;
  return run;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::bench;
  CLI::App app{
      "End-to-end CPU prefill/decode throughput on a random Llama-3.2-1B-shaped model (bf16 or "
      "MLX-quantized)"};
  int threads = 0, prompt = 128, steps = 32, reps = 2, bits = 0;
  std::string dir_opt;
  app.add_option("--threads", threads, "threads (0: all cores)");
  app.add_option("--prompt", prompt, "prompt tokens to prefill");
  app.add_option("--steps", steps, "decode steps per measurement");
  app.add_option("--reps", reps, "repetitions (the best is reported)");
  app.add_option("--bits", bits, "0: bf16 weights; 2-6 or 8: MLX-quantized, groups of 64")
      ->check(CLI::IsMember({0, 2, 3, 4, 5, 6, 8}));
  app.add_option("--model-dir", dir_opt, "reuse (or write once into) this directory instead of a temporary one");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) ThreadPool::set_global_threads(threads);

  Shape1B shape;
  fs::path dir = dir_opt.empty() ? fs::temp_directory_path() / ("tessera-bench-llama-" + std::to_string(getpid()))
                                 : fs::path(dir_opt);
  if (!fs::exists(dir / "model.safetensors")) {
    auto t0 = Clock::now();
    write_checkpoint(dir, shape, bits);
    std::printf("wrote %s in %.1f s\n", dir.c_str(), since(t0));
  }

  auto be = make_cpu_backend({.reference = false, .threads = threads});
  ThreadPool& pool = ThreadPool::global();
  LoadedModel lm = load_model(dir, *be);
  double weight_gb = double(lm.weights->total_bytes()) / 1e9;

  std::mt19937 rng(7);
  Run best1, best8, best_prefill;
  // The read bandwidth is measured again before every run and the best is kept: on a shared
  // machine it varies, and the best seen is the conservative ceiling to compare decode with.
  double bw = 0;
  for (int r = 0; r < reps; ++r) {
    bw = std::max(bw, read_bandwidth_gbs(pool));
    Run a = run_batch(lm, *be, 1, prompt, steps, rng);
    if (r == 0 || a.prefill_s < best_prefill.prefill_s) best_prefill = a;
    if (r == 0 || a.decode_s / a.decode_steps < best1.decode_s / best1.decode_steps) best1 = a;
    bw = std::max(bw, read_bandwidth_gbs(pool));
    Run b = run_batch(lm, *be, 8, 16, steps, rng);
    if (r == 0 || b.decode_s / b.decode_steps < best8.decode_s / best8.decode_steps) best8 = b;
  }
  double dec1 = best1.decode_steps / best1.decode_s, dec8 = 8.0 * best8.decode_steps / best8.decode_s;
  double gbs1 = weight_gb * best1.decode_steps / best1.decode_s, gbs8 = weight_gb * best8.decode_steps / best8.decode_s;
  bw = std::max(bw, read_bandwidth_gbs(pool));
  std::printf("weights: %s\n",
              bits ? (std::to_string(bits) + "-bit MLX codes, groups of 64, bf16 scales").c_str() : "bf16");
  std::printf("threads: %d, kernels: %s, memory read bandwidth (best of %d measurements between the runs): %.1f GB/s, "
              "weights read per decode step: %.2f GB\n\n",
              pool.size(), cpu::fast::isa_name(cpu::fast::isa()), 2 * reps + 1, bw, weight_gb);
  std::printf("%-34s %10s %12s %9s %11s\n", "", "tok/s", "weight GB/s", "% of bw", "cores used");
  std::printf("%-34s %10.1f %12s %9s %11.2f\n", ("prefill " + std::to_string(prompt) + " tokens, batch 1").c_str(),
              prompt / best_prefill.prefill_s, "", "", best_prefill.prefill_cpu_s / best_prefill.prefill_s);
  std::printf("%-34s %10.2f %12.1f %8.0f%% %11.2f\n", "decode, batch 1", dec1, gbs1, 100 * gbs1 / bw,
              best1.decode_cpu_s / best1.decode_s);
  std::printf("%-34s %10.2f %12.1f %8.0f%% %11.2f\n", "decode, batch 8 (8 sequences)", dec8, gbs8, 100 * gbs8 / bw,
              best8.decode_cpu_s / best8.decode_s);
  std::printf("\nresident memory after the runs: %.2f GB\n", resident_gb());
  if (dir_opt.empty()) fs::remove_all(dir);
  return 0;
}

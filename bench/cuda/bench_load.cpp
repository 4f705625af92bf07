// Start-up of `tessera serve` on the GPU with a Llama-3.1-8B-shaped bf16 checkpoint (hidden 4096,
// intermediate 14336, 32 layers, 32 heads / 8 kv heads of 128, vocab 128256, untied, llama3 rope,
// 131072 positions; random weights). Writes the checkpoint once as transformers does (sharded
// safetensors + index, config.json; no tokenizer: serve then takes token ids), reads it into the
// page cache, then times `tessera serve` from exec to GET /health answering 200, and reads the
// server's log for the weights' upload rate and the KV capacity. A second start without
// --kv-cache-memory shows the profiled default (--gpu-memory-utilization 0.9). With --shape
// qwen3-4b (or qwen3-30b-a3b) --write-only it writes such a checkpoint for bench_engine and stops;
// with --bits 4 or 8 every matrix is MLX-quantized (groups of 64, bf16 scales and biases, or f16
// with --scales f16), as mlx-lm's convert writes it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool ones;  // norm weights: 1.0
  std::string dtype = "BF16";  // or F16 (a quantized matrix's scales), or U32 (its codes: random bits)
  size_t bytes() const {
    size_t n = dtype == "U32" ? 4 : 2;
    for (int64_t d : shape) n *= size_t(d);
    return n;
  }
};

// A decoder checkpoint's shape: its tensors in transformers' order, its config.json, and the
// name of its default directory (under the temporary directory).
struct Checkpoint {
  std::vector<TensorSpec> tensors;
  json config;
  std::string dir_name;
};

// Llama-style layers of hidden H, intermediate I, L layers, nq / nkv heads of Dh, vocab V; with
// qk_norm each layer has Qwen3's per-head q/k norms; tied: no lm_head (the embeddings serve).
// With experts > 0 each layer's MLP is Qwen3-MoE's: a router and that many experts of I.
std::vector<TensorSpec> decoder_tensors(int64_t H, int64_t I, int64_t L, int64_t nq, int64_t nkv, int64_t Dh,
                                        int64_t V, bool qk_norm, bool tied, int64_t experts = 0) {
  const int64_t Q = nq * Dh, KV = nkv * Dh;
  std::vector<TensorSpec> t = {{"model.embed_tokens.weight", {V, H}, false}};
  for (int64_t l = 0; l < L; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {H}, true});
    t.push_back({p + "self_attn.q_proj.weight", {Q, H}, false});
    t.push_back({p + "self_attn.k_proj.weight", {KV, H}, false});
    t.push_back({p + "self_attn.v_proj.weight", {KV, H}, false});
    t.push_back({p + "self_attn.o_proj.weight", {H, Q}, false});
    if (qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {Dh}, true});
      t.push_back({p + "self_attn.k_norm.weight", {Dh}, true});
    }
    t.push_back({p + "post_attention_layernorm.weight", {H}, true});
    if (experts > 0) t.push_back({p + "mlp.gate.weight", {experts, H}, false});
    for (int64_t e = 0; e < std::max<int64_t>(experts, 1); ++e) {
      const std::string m = experts > 0 ? p + "mlp.experts." + std::to_string(e) + "." : p + "mlp.";
      t.push_back({m + "gate_proj.weight", {I, H}, false});
      t.push_back({m + "up_proj.weight", {I, H}, false});
      t.push_back({m + "down_proj.weight", {H, I}, false});
    }
  }
  t.push_back({"model.norm.weight", {H}, true});
  if (!tied) t.push_back({"lm_head.weight", {V, H}, false});
  return t;
}

// The start-up targets' model: Llama-3.1-8B's shape.
Checkpoint llama_8b() {
  json config = {{"architectures", {"LlamaForCausalLM"}},
                 {"model_type", "llama"},
                 {"hidden_size", 4096},
                 {"intermediate_size", 14336},
                 {"num_hidden_layers", 32},
                 {"num_attention_heads", 32},
                 {"num_key_value_heads", 8},
                 {"head_dim", 128},
                 {"vocab_size", 128256},
                 {"max_position_embeddings", 131072},
                 {"rms_norm_eps", 1e-5},
                 {"rope_theta", 500000.0},
                 {"rope_scaling",
                  {{"rope_type", "llama3"},
                   {"factor", 8.0},
                   {"low_freq_factor", 1.0},
                   {"high_freq_factor", 4.0},
                   {"original_max_position_embeddings", 8192}}},
                 {"tie_word_embeddings", false},
                 {"torch_dtype", "bfloat16"},
                 {"bos_token_id", 128000},
                 {"eos_token_id", 128001},
                 {"hidden_act", "silu"}};
  return {decoder_tensors(4096, 14336, 32, 32, 8, 128, 128256, false, false), config, "tessera-bench-load-8b"};
}

// Qwen3's config fields (per-head q/k norms, its vocabulary and rope) for a shape's sizes.
json qwen3_config(int hidden, int intermediate, int layers, int kv_heads, bool tied) {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"hidden_size", hidden},
          {"intermediate_size", intermediate},
          {"num_hidden_layers", layers},
          {"num_attention_heads", 32},
          {"num_key_value_heads", kv_heads},
          {"head_dim", 128},
          {"vocab_size", 151936},
          {"max_position_embeddings", 40960},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"attention_bias", false},
          {"tie_word_embeddings", tied},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 151643},
          {"eos_token_id", 151645},
          {"hidden_act", "silu"}};
}

// Qwen3-4B's shape (tied embeddings): for bench_engine --model, to time a qk-norm model's decode.
Checkpoint qwen3_4b() {
  return {decoder_tensors(2560, 9728, 36, 32, 8, 128, 151936, true, true), qwen3_config(2560, 9728, 36, 8, true),
          "tessera-bench-load-qwen3-4b"};
}

// Qwen3-30B-A3B's shape (128 experts of 768, 8 a token) with `layers` of its 48 layers: a mixture
// of experts for bench_engine --model (the whole model's 61 GB would not fit the GPU machine's disk
// beside the others).
Checkpoint qwen3_30b_a3b(int layers) {
  json config = qwen3_config(2048, 6144, layers, 4, false);
  config["architectures"] = {"Qwen3MoeForCausalLM"};
  config["model_type"] = "qwen3_moe";
  config.update({{"moe_intermediate_size", 768},
                 {"num_experts", 128},
                 {"num_experts_per_tok", 8},
                 {"norm_topk_prob", true},
                 {"decoder_sparse_step", 1},
                 {"mlp_only_layers", json::array()}});
  return {decoder_tensors(2048, 768, layers, 32, 4, 128, 151936, true, false, 128), config,
          "tessera-bench-load-qwen3-30b-a3b-" + std::to_string(layers) + "l"};
}

// The checkpoint with every matrix as `bits`-wide MLX codes in groups of 64: its weight becomes U32
// codes, with scales and biases of `scales` (BF16 or F16) beside it, and config.json says so.
void quantize(Checkpoint& c, int bits, const std::string& scales) {
  std::vector<TensorSpec> out;
  for (const TensorSpec& t : c.tensors) {
    if (t.shape.size() != 2) {
      out.push_back(t);
      continue;
    }
    const int64_t rows = t.shape[0], in = t.shape[1];
    const std::string base = t.name.substr(0, t.name.size() - std::string(".weight").size());
    out.push_back({t.name, {rows, in * bits / 32}, false, "U32"});
    out.push_back({base + ".scales", {rows, in / 64}, false, scales});
    out.push_back({base + ".biases", {rows, in / 64}, false, scales});
  }
  c.tensors = std::move(out);
  c.config["quantization"] = {{"group_size", 64}, {"bits", bits}};
  c.dir_name += "-q" + std::to_string(bits) + (scales == "F16" ? "-f16" : "");
}

struct Shard {
  std::string file;
  std::vector<const TensorSpec*> tensors;
  std::string header;  // 8-byte length prefix not included; padded to 8 bytes
  size_t file_bytes() const {
    size_t n = 8 + header.size();
    for (auto* t : tensors) n += t->bytes();
    return n;
  }
};

// Shards of at most 5 GB (transformers' default max_shard_size), with their headers.
std::vector<Shard> plan_shards(const std::vector<TensorSpec>& all) {
  std::vector<Shard> shards;
  size_t in_shard = 0;
  for (auto& t : all) {
    if (shards.empty() || in_shard + t.bytes() > size_t(5e9)) shards.emplace_back(), in_shard = 0;
    shards.back().tensors.push_back(&t);
    in_shard += t.bytes();
  }
  char name[64];
  for (size_t i = 0; i < shards.size(); ++i) {
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    shards[i].file = name;
    json h = {{"__metadata__", {{"format", "pt"}}}};
    size_t off = 0;
    for (auto* t : shards[i].tensors) {
      h[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {off, off + t->bytes()}}};
      off += t->bytes();
    }
    shards[i].header = h.dump();
    shards[i].header.append((8 - shards[i].header.size() % 8) % 8, ' ');
  }
  return shards;
}

// bf16 (or f16) values of magnitude 2^-9 .. 2^-5 with random sign and mantissa (splitmix64 bits).
void fill_random(uint16_t* p, size_t n, uint64_t seed, bool f16) {
  uint64_t x = seed;
  for (size_t i = 0; i < n; i += 4) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (size_t k = 0; k < 4 && i + k < n; ++k) {
      uint16_t r = uint16_t(z >> (16 * k));
      p[i + k] = f16 ? uint16_t((r & 0x83ff) | ((6 + ((r >> 10) & 3)) << 10))
                     : uint16_t((r & 0x807f) | ((0x76 + ((r >> 7) & 3)) << 7));
    }
  }
}

void write_checkpoint(const fs::path& dir, const std::vector<Shard>& shards, const json& config) {
  fs::create_directories(dir);
  const size_t chunk = size_t(64) << 20;
  std::vector<uint16_t> buf(chunk / 2);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  size_t total = 0;
  uint64_t seed = 1;
  for (auto& s : shards) {
    std::ofstream out(dir / s.file, std::ios::binary);
    uint64_t len = s.header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(s.header.data(), std::streamsize(s.header.size()));
    for (auto* t : s.tensors) {
      index["weight_map"][t->name] = s.file;
      for (size_t done = 0; done < t->bytes(); done += chunk) {
        size_t n = std::min(chunk, t->bytes() - done) / 2;
        if (t->ones) {
          std::fill(buf.begin(), buf.begin() + long(n), uint16_t(0x3f80));
        } else {
          std::vector<std::thread> pool;
          for (unsigned k = 0; k < threads; ++k)
            pool.emplace_back([&, k, base = seed] {
              size_t b = n * k / threads / 4 * 4, e = k + 1 == threads ? n : n * (k + 1) / threads / 4 * 4;
              fill_random(buf.data() + b, e - b, base * 1000003 + k, t->dtype == "F16");
            });
          for (auto& th : pool) th.join();
          ++seed;
        }
        out.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(n * 2));
      }
      total += t->bytes();
    }
    if (!out.good()) throw std::runtime_error("error writing " + (dir / s.file).string());
  }
  index["metadata"]["total_size"] = total;
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  std::ofstream(dir / "config.json") << config.dump(2);
}

bool checkpoint_present(const fs::path& dir, const std::vector<Shard>& shards) {
  std::error_code ec;
  for (auto& s : shards)
    if (fs::file_size(dir / s.file, ec) != s.file_bytes() || ec) return false;
  return fs::exists(dir / "config.json") && fs::exists(dir / "model.safetensors.index.json");
}

// Reads every safetensors file of `dir` once (into the page cache); returns bytes per second.
double read_into_page_cache(const fs::path& dir) {
  auto t0 = Clock::now();
  size_t total = 0;
  std::vector<char> buf(size_t(16) << 20);
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + e.path().string());
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += size_t(n);
    ::close(fd);
  }
  return double(total) / seconds_since(t0);
}

int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

// The status code of GET /health, or 0 when nothing answers.
int health_status(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int code = 0;
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    char resp[64] = {};
    if (send(s, req, sizeof req - 1, 0) > 0 && recv(s, resp, sizeof resp - 1, 0) > 12) code = std::atoi(resp + 9);
  }
  close(s);
  return code;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ServeRun {
  double ready_s = -1;  // exec to /health 200; -1: never ready
  std::string log;
};

// Starts `tessera serve`, waits for /health to answer 200 (or the server to exit, or the timeout),
// then stops it with SIGTERM.
ServeRun time_serve(const std::string& tessera, const std::vector<std::string>& args, const fs::path& log,
                    double timeout_s) {
  int port = free_port();
  std::vector<std::string> argv = {tessera, "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--port", std::to_string(port)});
  std::string cmd;
  for (auto& a : argv) cmd += a + " ";
  std::printf("$ %s\n", cmd.c_str());
  std::fflush(stdout);
  ServeRun r;
  auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(tessera.c_str(), cargv.data());
    _exit(127);
  }
  int status = 0;
  bool exited = false;
  while (seconds_since(t0) < timeout_s) {
    if (health_status(port) == 200) {
      r.ready_s = seconds_since(t0);
      break;
    }
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!exited) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 500 && waitpid(pid, &status, WNOHANG) != pid; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  r.log = read_text(log);
  if (r.ready_s < 0) std::printf("server not ready (%s); its log:\n%s\n", exited ? "exited" : "timed out", r.log.c_str());
  return r;
}

// The first group of the first match of `pattern` in `text`, or "?".
std::string capture(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? m[1].str() : std::string("?");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Start-up of tessera serve with an 8B-shaped bf16 checkpoint on the GPU"};
  std::string dir, shape = "llama-8b";
  std::string tessera = (fs::canonical("/proc/self/exe").parent_path() / "tessera").string();
  if (!fs::exists(tessera)) tessera = (fs::canonical("/proc/self/exe").parent_path() / ".." / ".." / "tessera").string();
  std::string device = "cuda";
  double timeout_s = 120;
  bool profiled = true;
  app.add_option("--dir", dir, "Checkpoint directory (written when absent or of the wrong size; default: "
                              "tessera-bench-load-8b or -qwen3-4b in the temporary directory)");
  app.add_option("--shape", shape, "Checkpoint shape: llama-8b (the targets'), qwen3-4b or qwen3-30b-a3b")
      ->check(CLI::IsMember({"llama-8b", "qwen3-4b", "qwen3-30b-a3b"}))
      ->capture_default_str();
  int moe_layers = 12;
  app.add_option("--moe-layers", moe_layers, "Layers of the qwen3-30b-a3b shape (of its 48)")->capture_default_str();
  bool write_only = false;
  app.add_flag("--write-only", write_only, "Write the checkpoint (when absent) and stop: a model for bench_engine");
  std::string model;
  app.add_option("--model", model, "Time this model directory instead (a real checkpoint; the targets are the 8B's)");
  app.add_option("--tessera", tessera, "The tessera binary")->capture_default_str();
  app.add_option("--device", device, "Device for serve")->capture_default_str();
  app.add_option("--timeout", timeout_s, "Seconds to wait for /health")->capture_default_str();
  app.add_flag("!--no-profiled", profiled, "Skip the second start (KV cache sized by --gpu-memory-utilization)");
  int bits = 0;
  app.add_option("--bits", bits, "0: bf16 matrices; 4 or 8: MLX-quantized, groups of 64")
      ->check(CLI::IsMember({0, 4, 8}))
      ->capture_default_str();
  std::string scales = "bf16";
  app.add_option("--scales", scales, "With --bits: the scales' and biases' dtype")
      ->check(CLI::IsMember({"bf16", "f16"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  Checkpoint ckpt = shape == "qwen3-4b"        ? qwen3_4b()
                    : shape == "qwen3-30b-a3b" ? qwen3_30b_a3b(moe_layers)
                                               : llama_8b();
  if (bits) quantize(ckpt, bits, scales == "f16" ? "F16" : "BF16");
  if (dir.empty()) dir = (fs::temp_directory_path() / ckpt.dir_name).string();
  const std::vector<TensorSpec>& tensors = ckpt.tensors;
  auto shards = plan_shards(tensors);
  size_t weight_bytes = 0;
  for (auto& t : tensors) weight_bytes += t.bytes();
  if (!model.empty()) {
    dir = model;
    std::printf("checkpoint: %s (given)\n", dir.c_str());
  } else if (checkpoint_present(dir, shards)) {
    std::printf("checkpoint: %s (present, %.2f GB)\n", dir.c_str(), double(weight_bytes) / 1e9);
  } else {
    auto t0 = Clock::now();
    write_checkpoint(dir, shards, ckpt.config);
    std::printf("checkpoint: %s written, %.2f GB in %zu shards, %.1f s\n", dir.c_str(), double(weight_bytes) / 1e9,
                shards.size(), seconds_since(t0));
  }
  if (write_only) return 0;
  double read_bps = read_into_page_cache(dir);
  std::printf("page cache: read at %.1f GB/s\n", read_bps / 1e9);

  fs::path log_dir = fs::temp_directory_path();
  ServeRun fixed = time_serve(tessera, {"-m", dir, "--device", device, "--kv-cache-memory", "40GiB"},
                              log_dir / "bench_load_serve.log", timeout_s);
  ServeRun prof;
  if (profiled)
    prof = time_serve(tessera, {"-m", dir, "--device", device}, log_dir / "bench_load_serve_profiled.log", timeout_s);
  for (const ServeRun* r : {&fixed, &prof}) {
    std::istringstream in(r->log);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("weights:", 0) == 0 || line.rfind("loaded", 0) == 0) std::printf("  server: %s\n", line.c_str());
  }

  std::string upload_rate = capture(fixed.log, R"(weights: .* \(([0-9.]+) GB/s\))");
  std::string upload_s = capture(fixed.log, R"(weights: .* in ([0-9.]+) s)");
  std::string kv_tokens = capture(fixed.log, R"(KV cache ([0-9]+) tokens)");
  std::string prof_kv = capture(prof.log, R"(KV cache ([0-9]+ tokens \([0-9.]+ GiB, [A-Z0-9]+))") + ")";
  bool ready_ok = fixed.ready_s >= 0 && fixed.ready_s < 10;
  bool kv_ok = kv_tokens != "?" && std::stoll(kv_tokens) >= 300000;

  auto secs = [](double s) { return s < 0 ? std::string("not ready") : std::to_string(s).substr(0, 5) + " s"; };
  std::printf("\n%-52s %-34s %s\n", "measurement", "measured", "target");
  std::printf("%-52s %-34s %s\n", "serve exec -> /health 200 (--kv-cache-memory 40GiB)", secs(fixed.ready_s).c_str(),
              ready_ok ? "< 10 s  ok" : "< 10 s  MISSED");
  std::printf("%-52s %-34s %s\n", "weights upload (from the server's log)",
              (upload_rate + " GB/s in " + upload_s + " s").c_str(), "-");
  std::printf("%-52s %-34s %s\n", "KV tokens admitted (40GiB, bf16)", kv_tokens.c_str(),
              kv_ok ? ">= 300000  ok" : ">= 300000  MISSED");
  if (profiled) {
    std::printf("%-52s %-34s %s\n", "serve exec -> /health 200 (profiled KV size)", secs(prof.ready_s).c_str(), "-");
    std::printf("%-52s %-34s %s\n", "KV capacity at --gpu-memory-utilization 0.9", prof_kv.c_str(), "-");
  }
  std::printf("%-52s %-34s %s\n", "checkpoint read from the page cache",
              (std::to_string(read_bps / 1e9).substr(0, 5) + " GB/s").c_str(), "-");
  return ready_ok && kv_ok && (!profiled || prof.ready_s >= 0) ? 0 : 1;
}

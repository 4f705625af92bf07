#include "model_options.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "backend/cuda_loader.h"
#include "core/error.h"

namespace tessera::app {

void add_model_options(CLI::App& app, ModelOptions& o) {
  app.add_option("-m,--model", o.model_dir, "Hugging Face model directory (default: the bundled " TESSERA_DEFAULT_MODEL_NAME ")");
  app.add_option("--device", o.device, "cpu, cuda, cuda:N, or auto (default: a GPU if one is usable)");
  app.add_option("-t,--threads", o.threads, "CPU threads (default: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--max-model-len", o.max_model_len, "Context length (default: the model's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                 "KV cache element type: auto (the weights' type when 16-bit, else f32), f32, bf16 or f16")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}));
  app.add_flag("--enforce-eager", o.enforce_eager,
               "Launch every step's ops one by one (default on a GPU: decode steps replay CUDA graphs)");
  app.add_flag(
      "--keep-quantized", o.keep_quantized,
      "On a GPU, keep MLX-quantized weights as their codes (about a quarter of 16-bit weights' memory; "
      "4- and 8-bit codes decode a few sequences faster, many slower, prompts slower) instead of "
      "widening them to 16 bits at load (kept anyway where the widened weights would not fit)");
}

void add_sampling_flags(CLI::App& app, SamplingFlags& f) {
  app.add_option("--temperature", f.temperature, "Sampling temperature; 0 is greedy")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", f.top_k, "Keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", f.top_p, "Nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-p", f.min_p, "Drop tokens below min-p times the top probability")->check(CLI::Range(0.0, 1.0));
  app.add_option("--repetition-penalty", f.repetition_penalty, "Penalty on tokens already seen (1: off)")
      ->check(CLI::PositiveNumber);
  app.add_option("--presence-penalty", f.presence_penalty, "Subtracted once from each generated token's logit");
  app.add_option("--frequency-penalty", f.frequency_penalty, "Subtracted per occurrence of a generated token");
  app.add_option("--seed", f.seed, "Random seed; a fixed seed gives the same output every run");
}

SamplingParams sampling_params(const SamplingFlags& f, const HfConfig& cfg) {
  const auto& g = cfg.generation();
  SamplingParams p;
  bool do_sample = g.value("do_sample", false);
  p.temperature = f.temperature.value_or(do_sample ? g.value("temperature", 1.0f) : 0.0f);
  p.top_k = f.top_k.value_or(do_sample ? g.value("top_k", 0) : 0);
  p.top_p = f.top_p.value_or(do_sample ? g.value("top_p", 1.0f) : 1.0f);
  p.min_p = f.min_p.value_or(do_sample && g.contains("min_p") && g["min_p"].is_number() ? g["min_p"].get<float>() : 0.0f);
  p.repetition_penalty = f.repetition_penalty.value_or(g.value("repetition_penalty", 1.0f));
  p.presence_penalty = f.presence_penalty;
  p.frequency_penalty = f.frequency_penalty;
  return p;
}

const Tokenizer& LoadedRuntime::require_tokenizer() const {
  TESSERA_CHECK(tokenizer.has_value(),
                "the model directory has no tokenizer.json: give token ids (--prompt-ids) and print ids (--output-ids)");
  return *tokenizer;
}

std::vector<int32_t> LoadedRuntime::encode_prompt(const std::string& text) const {
  std::vector<int32_t> ids = encode_text(text, true);
  const Tokenizer& tok = *tokenizer;
  if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids[0] != tok.bos_id())) ids.insert(ids.begin(), tok.bos_id());
  return ids;
}

std::vector<int32_t> LoadedRuntime::encode_text(const std::string& text, bool add_special_tokens) const {
  return require_tokenizer().encode(text, add_special_tokens);
}

namespace {

std::unique_ptr<Backend> make_backend(const ModelOptions& o) {
  CpuOptions cpu{.reference = false, .threads = o.threads};
  if (o.device == "cpu") return make_cpu_backend(cpu);
  bool explicit_cuda = o.device.rfind("cuda", 0) == 0;
  TESSERA_CHECK(explicit_cuda || o.device == "auto", "--device must be cpu, cuda, cuda:N or auto");
  int index = 0;
  if (o.device.size() > 5 && o.device[4] == ':') index = std::stoi(o.device.substr(5));
  std::string error;
  if (auto be = load_cuda_backend(index, &error)) return be;
  TESSERA_CHECK(!explicit_cuda, error);
  return make_cpu_backend(cpu);  // auto: no usable GPU
}

}  // namespace

std::string LoadedRuntime::load_summary() const {
  char s[256];
  double gb = double(weight_bytes) / 1e9;
  // MLX-quantized weights stay codes where they are kept (in the mapping on the CPU, uploaded to a
  // GPU), else they are dequantized copies, in memory as their scales' dtype.
  if (loaded.weights->quantized())
    std::snprintf(s, sizeof s, "weights: %.2f GB of MLX-quantized codes, %s in %.2f s (%s)", gb,
                  !loaded.weights->keeps_quantized() ? "dequantized"
                  : backend->device() == Device::CPU ? "mapped"
                                                     : "uploaded as codes",
                  load_seconds, backend->name().c_str());
  // On the CPU the weights stay in the mapping (read on first use), so there is no rate to show.
  else if (backend->device() == Device::CPU)
    std::snprintf(s, sizeof s, "weights: %.2f GB mapped in %.2f s (%s)", gb, load_seconds, backend->name().c_str());
  else
    std::snprintf(s, sizeof s, "weights: %.2f GB uploaded in %.2f s (%.1f GB/s) to %s", gb, load_seconds,
                  load_seconds > 0 ? gb / load_seconds : 0.0, backend->name().c_str());
  return s;
}

DType resolve_kv_cache_dtype(const std::string& flag, const WeightStore& weights, Device device) {
  DType dt = DType::F32;
  if (flag == "bf16") dt = DType::BF16;
  else if (flag == "f16") dt = DType::F16;
  else if (flag == "auto") {
    size_t f32 = 0, f16 = 0, bf16 = 0;
    for (const auto& name : weights.names()) {
      Tensor t = weights.stored(name);  // quantized codes count by their scales' dtype
      if (t.dtype() == DType::F32) f32 += t.nbytes();
      else if (t.dtype() == DType::F16) f16 += t.nbytes();
      else if (t.dtype() == DType::BF16) bf16 += t.nbytes();
    }
    if (bf16 > f32 && bf16 >= f16) dt = DType::BF16;
    else if (f16 > f32) dt = DType::F16;
    // The CUDA attention kernels read f32 and bf16 caches: f16 weights get the exact f32 cache.
    if (dt == DType::F16 && device == Device::CUDA) dt = DType::F32;
  } else {
    TESSERA_CHECK(flag == "f32", "--kv-cache-dtype must be auto, f32, bf16 or f16");
  }
  TESSERA_CHECK(!(dt == DType::F16 && device == Device::CUDA),
                "--kv-cache-dtype f16: the CUDA backend's attention reads f32 and bf16 caches only (use bf16)");
  return dt;
}

std::string ModelOptions::dir() const {
  return model_dir.empty() ? TESSERA_DEFAULT_MODEL_DIR : model_dir;
}

namespace {

// A GPU widens MLX codes at load unless told to keep them (--keep-quantized), or unless they
// would not fit widened (models/model.h's widened_past): then it keeps them and says so.
bool widened_too_large(const std::filesystem::path& dir, Backend& be) {
  if (!be.holds_quantized()) return false;
  const size_t free = be.memory_info().free;
  const std::optional<size_t> widened = widened_past(dir, free);
  if (!widened) return false;
  std::fprintf(
      stderr,
      "the weights widened to 16 bits (%.1f GiB) would not fit the %.1f GiB free on %s: keeping their "
      "MLX codes, as --keep-quantized does\n",
      double(*widened) / double(1 << 30), double(free) / double(1 << 30), be.name().c_str());
  return true;
}

}  // namespace

LoadedRuntime load_runtime(const ModelOptions& o) {
  LoadedRuntime rt;
  rt.backend = make_backend(o);
  std::filesystem::path dir = o.dir();
  auto t0 = std::chrono::steady_clock::now();
  // The CPU computes with the codes; a GPU widens them at load unless told to keep them, or they
  // would not fit widened.
  const bool keep =
      o.keep_quantized || rt.backend->device() == Device::CPU || widened_too_large(dir, *rt.backend);
  rt.loaded = load_model(dir, *rt.backend, keep);
  rt.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rt.weight_bytes = rt.loaded.weights->total_bytes();
  rt.kv_cache_dtype = resolve_kv_cache_dtype(o.kv_cache_dtype, *rt.loaded.weights, rt.backend->device());
  rt.eos_ids = rt.loaded.config.eos_token_ids();
  if (std::filesystem::exists(dir / "tokenizer.json")) {
    rt.tokenizer = Tokenizer::load(dir);
    for (int32_t id : rt.tokenizer->eos_ids())
      if (std::find(rt.eos_ids.begin(), rt.eos_ids.end(), id) == rt.eos_ids.end()) rt.eos_ids.push_back(id);
  }
  return rt;
}

}  // namespace tessera::app

// Architectures by config.json model_type. Adding one: a file with its make_<name>, a line here.
#include <map>

#include "models/model.h"

namespace tessera {

std::unique_ptr<Model> make_gemma2(const HfConfig&, const WeightStore&, Backend&);
std::unique_ptr<Model> make_gemma3(const HfConfig&, const WeightStore&, Backend&);
std::unique_ptr<Model> make_llama(const HfConfig&, const WeightStore&, Backend&);
std::unique_ptr<Model> make_mixtral(const HfConfig&, const WeightStore&, Backend&);
std::unique_ptr<Model> make_phi3(const HfConfig&, const WeightStore&, Backend&);
std::unique_ptr<Model> make_qwen2(const HfConfig&, const WeightStore&, Backend&);
std::unique_ptr<Model> make_qwen3(const HfConfig&, const WeightStore&, Backend&);
std::unique_ptr<Model> make_qwen3_moe(const HfConfig&, const WeightStore&, Backend&);

namespace {

const std::map<std::string, ModelFactory>& architectures() {
  static const std::map<std::string, ModelFactory> table = {
      {"gemma2", make_gemma2},
      {"gemma3_text", make_gemma3},
      {"llama", make_llama},
      {"mixtral", make_mixtral},
      {"phi3", make_phi3},
      {"qwen2", make_qwen2},
      {"qwen3", make_qwen3},
      {"qwen3_moe", make_qwen3_moe},
  };
  return table;
}

// Architectures that are another one under a different name.
const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> table = {{"mistral", "llama"}};
  return table;
}

}  // namespace

const ModelFactory* find_architecture(const std::string& model_type, std::string* resolved) {
  std::string key = model_type;
  if (auto a = aliases().find(key); a != aliases().end()) key = a->second;
  auto it = architectures().find(key);
  if (it == architectures().end()) return nullptr;
  if (resolved) *resolved = key;
  return &it->second;
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> out;
  for (auto& [k, v] : architectures()) out.push_back(k);
  for (auto& [k, v] : aliases()) out.push_back(k);
  return out;
}

LoadedModel load_model(const std::filesystem::path& dir, Backend& be, bool keep_quantized) {
  LoadedModel m{HfConfig::load(dir), nullptr, nullptr, ""};
  std::string type = m.config.model_type();
  const ModelFactory* factory = find_architecture(type, &m.architecture);
  if (!factory) {
    std::string known;
    for (auto& a : supported_architectures()) known += (known.empty() ? "" : ", ") + a;
    throw Error(dir.string() + "/config.json: unsupported model_type \"" + type + "\" (supported: " + known + ")");
  }
  m.weights = std::make_unique<WeightStore>(dir);
  if (auto q = MlxQuantization::from_config(m.config.raw()))
    m.weights->set_quantization(std::move(*q), keep_quantized && be.holds_quantized());
  m.model = (*factory)(m.config, *m.weights, be);
  return m;
}

std::optional<size_t> widened_past(const std::filesystem::path& dir, size_t free_bytes) {
  std::optional<MlxQuantization> q = MlxQuantization::from_config(HfConfig::load(dir).raw());
  if (!q) return std::nullopt;
  WeightStore weights(dir);
  weights.set_quantization(std::move(*q), false);
  const size_t widened = weights.widened_bytes();
  if (double(widened) <= 0.9 * double(free_bytes)) return std::nullopt;
  return widened;
}

}  // namespace tessera

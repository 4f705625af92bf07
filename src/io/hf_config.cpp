#include "io/hf_config.h"

#include <fstream>

namespace tessera {

using nlohmann::json;

namespace {
json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  TESSERA_CHECK(in, "cannot open " + path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error(path.string() + ": malformed JSON: " + e.what());
  }
}

void add_ids(const json& v, std::vector<int32_t>& out) {
  if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  else if (v.is_array())
    for (auto& x : v)
      if (x.is_number_integer()) out.push_back(x.get<int32_t>());
}
}  // namespace

HfConfig HfConfig::load(const std::filesystem::path& dir) {
  TESSERA_CHECK(std::filesystem::is_directory(dir), "model directory " + dir.string() + " does not exist");
  auto cfg = dir / "config.json";
  TESSERA_CHECK(std::filesystem::exists(cfg), dir.string() + ": no config.json");
  json gen = json::object();
  if (std::filesystem::exists(dir / "generation_config.json")) gen = read_json(dir / "generation_config.json");
  return from_json(read_json(cfg), gen);
}

HfConfig HfConfig::from_json(json config, json generation) {
  TESSERA_CHECK(config.is_object(), "config.json is not a JSON object");
  HfConfig c;
  c.config_ = std::move(config);
  c.generation_ = generation.is_object() ? std::move(generation) : json::object();
  return c;
}

std::string HfConfig::model_type() const { return get<std::string>("model_type"); }

std::vector<int32_t> HfConfig::eos_token_ids() const {
  std::vector<int32_t> ids;
  if (generation_.contains("eos_token_id")) add_ids(generation_["eos_token_id"], ids);
  if (ids.empty() && config_.contains("eos_token_id")) add_ids(config_["eos_token_id"], ids);
  return ids;
}

}  // namespace tessera

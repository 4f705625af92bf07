#include "tokenizer/special_config.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_scan.h"

namespace tessera::tok {

namespace {

using json = nlohmann::json;

// The top-level keys of `path` that matter here, or null when the file does not exist. The
// rest (added_tokens_decoder, chat_template: often most of the file) is skipped unparsed.
json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const char* kKeys[] = {"bos_token", "eos_token", "pad_token", "unk_token", "add_bos_token",
                                "add_eos_token", "eos_token_id", "bos_token_id", "pad_token_id"};
  json out = json::object();
  try {
    JsonScanner js(text, path.string());
    js.object([&](const std::string& key) {
      std::string_view raw = js.skip_value();
      for (const char* k : kKeys)
        if (key == k) out[key] = json::parse(raw);
    });
  } catch (const json::exception& e) {
    throw Error(path.string() + ": invalid JSON: " + e.what());
  }
  return out;
}

std::string token_text(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return {};
}

void add_ids(const json& cfg, const char* key, std::vector<int32_t>& out) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return;
  auto add = [&](const json& v) {
    if (v.is_number_integer() && std::find(out.begin(), out.end(), v.get<int32_t>()) == out.end())
      out.push_back(v.get<int32_t>());
  };
  if (it->is_array())
    for (const auto& v : *it) add(v);
  else add(*it);
}

int32_t first_id(const json& cfg, const char* key) {
  std::vector<int32_t> ids;
  if (cfg.is_object()) add_ids(cfg, key, ids);
  return ids.empty() ? -1 : ids[0];
}

}  // namespace

SpecialConfig load_special_config(const std::filesystem::path& dir, const std::function<int32_t(std::string_view)>& resolve) {
  SpecialConfig sc;
  json tc = read_json(dir / "tokenizer_config.json");
  json gc = read_json(dir / "generation_config.json");
  json mc = read_json(dir / "config.json");
  if (tc.is_object()) {
    sc.bos_token = token_text(tc, "bos_token");
    sc.eos_token = token_text(tc, "eos_token");
    sc.pad_token = token_text(tc, "pad_token");
    sc.unk_token = token_text(tc, "unk_token");
    sc.add_bos = tc.value("add_bos_token", false);
    sc.add_eos = tc.value("add_eos_token", false);
  }
  sc.bos_id = resolve(sc.bos_token);
  sc.pad_id = resolve(sc.pad_token);
  sc.unk_id = resolve(sc.unk_token);
  if (int32_t e = resolve(sc.eos_token); e >= 0) sc.eos_ids.push_back(e);
  // generation_config.json decides what ends generation; config.json is the older place for it.
  const json& gen = gc.is_object() ? gc : mc;
  if (gen.is_object()) add_ids(gen, "eos_token_id", sc.eos_ids);
  if (sc.bos_id < 0) sc.bos_id = first_id(gen, "bos_token_id");
  if (sc.pad_id < 0) sc.pad_id = first_id(gen, "pad_token_id");
  return sc;
}

}  // namespace tessera::tok

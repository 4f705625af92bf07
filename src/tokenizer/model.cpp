#include "tokenizer/model.h"

#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/json_scan.h"

namespace tessera::tok {

void Model::add_token(std::string_view token, int32_t id) {
  if (id < 0) throw Error("tokenizer.json: negative token id for '" + std::string(token) + "'");
  if (size_t(id) >= tokens_.size()) {
    tokens_.resize(size_t(id) + 1);
    has_.resize(size_t(id) + 1);
  }
  tokens_[id].assign(token);
  has_[id] = true;
  vocab_.set(token, id);
}

std::unique_ptr<Model> load_model(std::string_view model_json, const std::string& where) {
  // The vocabulary and merges stay raw text for the fast scanner; the small fields go to nlohmann.
  std::map<std::string, std::string_view> raw;
  JsonScanner js(model_json, where + " model");
  js.object([&](const std::string& key) { raw[key] = js.skip_value(); });
  nlohmann::json small = nlohmann::json::object();
  for (auto& [k, v] : raw)
    if (k != "vocab" && k != "merges") small[k] = nlohmann::json::parse(v);

  std::string type = small.contains("type") && small["type"].is_string() ? small["type"].get<std::string>() : "";
  if (type.empty() && raw.count("merges")) type = "BPE";
  if (type != "BPE") throw Error(where + ": unsupported tokenizer model " + (type.empty() ? "(no type)" : type));
  if (!raw.count("vocab") || !raw.count("merges")) throw Error(where + ": BPE model needs 'vocab' and 'merges'");

  auto str = [&](const char* k) {
    return small.contains(k) && small[k].is_string() ? small[k].get<std::string>() : std::string();
  };
  auto flag = [&](const char* k) { return small.contains(k) && small[k].is_boolean() && small[k].get<bool>(); };
  BpeOptions opt;
  opt.unk_token = str("unk_token");
  opt.continuing_subword_prefix = str("continuing_subword_prefix");
  opt.end_of_word_suffix = str("end_of_word_suffix");
  opt.fuse_unk = flag("fuse_unk");
  opt.byte_fallback = flag("byte_fallback");
  opt.ignore_merges = flag("ignore_merges");
  return std::make_unique<BpeModel>(raw["vocab"], raw["merges"], std::move(opt), where);
}

}  // namespace tessera::tok

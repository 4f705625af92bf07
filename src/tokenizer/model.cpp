#include "tokenizer/model.h"

#include <climits>
#include <deque>
#include <future>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/json_scan.h"

namespace tessera::tok {

void Model::load_vocab(std::string_view vocab_json, const std::string& where) {
  JsonScanner js(vocab_json, where);
  std::vector<std::pair<std::string_view, int32_t>> entries;
  entries.reserve(vocab_json.size() / 12);
  std::deque<std::string> unescaped;  // keys that held escapes; views into the JSON otherwise
  std::string buf;
  int32_t max_id = -1;
  js.object_views([&](std::string_view key, bool escaped) {
    if (escaped) key = unescaped.emplace_back(key);
    long long id = js.integer();
    if (id < 0 || id > INT32_MAX) js.fail("token id out of range for '" + std::string(key) + "'");
    entries.emplace_back(key, int32_t(id));
    max_id = std::max(max_id, int32_t(id));
  });
  vocab_.reserve(entries.size());
  tokens_.assign(size_t(max_id + 1), kNone);
  constexpr size_t kBatch = 16;
  uint64_t hashes[kBatch];
  for (size_t base = 0; base < entries.size(); base += kBatch) {
    size_t n = std::min(kBatch, entries.size() - base);
    for (size_t i = 0; i < n; ++i) hashes[i] = vocab_.prefetch(entries[base + i].first);
    for (size_t i = 0; i < n; ++i) {
      auto [token, id] = entries[base + i];
      tokens_[id] = (uint64_t(vocab_.set(token, id, hashes[i])) << 32) | token.size();
    }
  }
}

std::unique_ptr<Model> load_model(JsonScanner& js, const std::string& where) {
  auto model = std::make_unique<BpeModel>();
  // The vocabulary is built on a worker thread while this one parses the merges that follow it.
  std::future<void> vocab_done;
  std::vector<MergeText> merges;
  std::deque<std::string> owned;
  bool has_vocab = false, has_merges = false;
  nlohmann::json small = nlohmann::json::object();
  js.object([&](const std::string& key) {
    if (key == "vocab" && js.peek() == '{') {
      std::string_view raw = js.skip_value();
      has_vocab = true;
      vocab_done = std::async(std::launch::async, [&model, raw, &where] { model->load_vocab(raw, where + " model.vocab"); });
    } else if (key == "merges" && js.peek() == '[') {
      merges = parse_merges(js, owned);
      has_merges = true;
    } else {
      small[key] = nlohmann::json::parse(js.skip_value());
    }
  });
  std::exception_ptr vocab_error;
  if (vocab_done.valid()) {
    try {
      vocab_done.get();
    } catch (...) {
      vocab_error = std::current_exception();
    }
  }

  std::string type = small.contains("type") && small["type"].is_string() ? small["type"].get<std::string>() : "";
  if (type.empty() && has_merges) type = "BPE";
  if (type != "BPE") throw Error(where + ": unsupported tokenizer model " + (type.empty() ? "(no type)" : type));
  if (!has_vocab || !has_merges) throw Error(where + ": BPE model needs 'vocab' and 'merges'");
  if (vocab_error) std::rethrow_exception(vocab_error);

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
  model->build(std::move(opt), merges, where);
  return model;
}

}  // namespace tessera::tok
